"""fp32 row softmax: out[i, :] = softmax(x[i, :]) over the last dimension."""

import torch

SHAPES = [{"m": 1, "n": 1}, {"m": 7, "n": 33}, {"m": 64, "n": 1000}, {"m": 129, "n": 257}]
BENCH_SHAPES = [{"m": 8192, "n": 8192}, {"m": 32768, "n": 1024}]
FORBIDDEN = ["softmax", "aten::exp", "aten::amax", "aten::max"]
# a kernel must take any layout torch can hand it, empty batches and IEEE NaN/Inf, which
# torch.softmax propagates; an empty row (n=0) has no softmax worth defining
EDGE_INPUTS = {
    "padded": True,
    "strided": True,
    "broadcast": True,
    "size0": ["m"],
    "nonfinite": True,
}


def generate_input(seed: int, m: int, n: int, device: str = "cpu") -> tuple[torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(seed)
    # a wide range so that skipping the max subtraction overflows
    x = torch.randn(m, n, generator=gen, device=device, dtype=torch.float32) * 30.0
    return (x,)


def ref_kernel(inputs: tuple[torch.Tensor]) -> torch.Tensor:
    (x,) = inputs
    return torch.softmax(x, dim=-1)


def flops(m: int, n: int) -> float:
    return 5.0 * m * n


def bytes(m: int, n: int) -> float:
    return 2.0 * 4 * m * n
