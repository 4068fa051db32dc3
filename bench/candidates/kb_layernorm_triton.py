"""An honest KernelBench ModelNew for level1/40_LayerNorm (written for bench/gpu/gpu_suites.py):
one program per row of the normalized shape, two passes over it."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + offsets, mask=offsets < n, other=0.0).to(tl.float32)
        acc += x
        acc2 += x * x
    mean = tl.sum(acc, axis=0) / n
    var = tl.sum(acc2, axis=0) / n - mean * mean
    rstd = 1.0 / tl.sqrt(var + eps)
    for start in range(0, n, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + row + offsets, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offsets, mask=mask, other=1.0)
        b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
        tl.store(out_ptr + row + offsets, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = self.ln.weight.numel()
        out = torch.empty_like(x)
        rows = x.numel() // n
        layernorm_kernel[(rows,)](x, self.ln.weight, self.ln.bias, out, n, self.ln.eps, BLOCK=1024)
        return out
