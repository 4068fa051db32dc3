"""fp32 vector add: out = x + y for 1-D tensors of any length."""

import torch

SHAPES = [{"n": 1}, {"n": 1000}, {"n": 4097}, {"n": 50_000}]
BENCH_SHAPES = [{"n": 2**28}]
FORBIDDEN = ["add", "aten::add"]


def generate_input(seed: int, n: int, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(n, generator=gen, device=device, dtype=torch.float32)
    y = torch.randn(n, generator=gen, device=device, dtype=torch.float32)
    return x, y


def ref_kernel(inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = inputs
    return x + y


def flops(n: int) -> float:
    return float(n)


def bytes(n: int) -> float:
    return 3.0 * 4 * n
