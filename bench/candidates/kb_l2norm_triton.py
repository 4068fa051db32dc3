"""An honest KernelBench ModelNew for level1/39_L2Norm_: one program per row sums the
squares, then scales the row by the inverse norm."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2norm_rows(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    norm = tl.sqrt(tl.sum(acc, 0))
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * stride + cols, x / norm, mask=cols < n_cols)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        l2norm_rows[(rows,)](x, out, cols, x.stride(0), BLOCK=1024)
        return out
