"""bf16 matmul: out = a @ b with a (m, k), b (k, n) in bf16, accumulated in fp32, out in bf16."""

import torch

SHAPES = [
    {"m": 1, "k": 16, "n": 1},
    {"m": 32, "k": 64, "n": 48},
    {"m": 100, "k": 72, "n": 130},
    {"m": 65, "k": 257, "n": 33},
]
BENCH_SHAPES = [{"m": 8192, "k": 8192, "n": 8192}, {"m": 4096, "k": 4096, "n": 4096}]
FORBIDDEN = ["matmul"]


def generate_input(
    seed: int, m: int, k: int, n: int, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16)
    b = torch.randn(k, n, generator=gen, device=device, dtype=torch.float32).to(torch.bfloat16)
    return a, b


def ref_kernel(inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    a, b = inputs
    # fp32 accumulation of the exact bf16 products, rounded once to bf16
    return (a.float() @ b.float()).to(torch.bfloat16)


def flops(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n


def bytes(m: int, k: int, n: int) -> float:
    return 2.0 * (m * k + k * n + m * n)
