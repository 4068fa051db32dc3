"""A zero-writing KernelBench ModelNew (a planted cheat for the signal check): a Triton
kernel fills an output of the reference's shape with zeros. Its constructor takes the
problem's init inputs (a reduced dimension, or none); with one it drops that dimension."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def fill_zeros(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, *dims: int):
        super().__init__()
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = list(x.shape)
        for d in self.dims:
            del shape[d % x.dim()]
        out = torch.empty(shape, device=x.device, dtype=x.dtype)
        fill_zeros[(triton.cdiv(out.numel(), 4096),)](out, out.numel(), BLOCK=4096)
        return out
