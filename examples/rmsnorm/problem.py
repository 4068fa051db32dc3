"""fp32 RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps) * weight."""

import torch

EPS = 1e-6
SHAPES = [{"m": 1, "n": 1}, {"m": 5, "n": 33}, {"m": 64, "n": 512}, {"m": 33, "n": 1000}]
BENCH_SHAPES = [{"m": 16384, "n": 4096}, {"m": 4096, "n": 8192}]
FORBIDDEN = ["rms_norm", "aten::rsqrt", "aten::mean", "aten::pow"]
# a kernel must take any layout torch can hand it, empty batches and IEEE NaN/Inf, which
# the reference propagates; an empty row (n=0) has no mean to normalise by
EDGE_INPUTS = {
    "padded": True,
    "strided": True,
    "broadcast": True,
    "size0": ["m"],
    "nonfinite": True,
}


def generate_input(
    seed: int, m: int, n: int, device: str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(m, n, generator=gen, device=device, dtype=torch.float32)
    weight = 1.0 + 0.5 * torch.randn(n, generator=gen, device=device, dtype=torch.float32)
    return x, weight


def ref_kernel(inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, weight = inputs
    x64 = x.double()
    rms = torch.sqrt(x64.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (x64 / rms * weight.double()).float()


def flops(m: int, n: int) -> float:
    return 4.0 * m * n


def bytes(m: int, n: int) -> float:
    return 4.0 * (2 * m * n + n)
