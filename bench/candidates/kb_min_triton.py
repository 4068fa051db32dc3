"""An honest KernelBench ModelNew for level1/53_Min_reduction_over_a_dimension: the input
seen as (outer, reduced, inner); one program per outer index and block of inner columns
walks the reduced dimension keeping a running minimum."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def min_over_middle(x_ptr, out_ptr, reduced, inner, BLOCK: tl.constexpr):
    outer = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < inner
    base = x_ptr + outer * reduced * inner
    acc = tl.full([BLOCK], float("inf"), tl.float32)
    for r in range(0, reduced):
        x = tl.load(base + r * inner + cols, mask=mask, other=float("inf")).to(tl.float32)
        acc = tl.minimum(acc, x)
    tl.store(out_ptr + outer * inner + cols, acc, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        shape = list(x.shape)
        outer = 1
        for s in shape[:dim]:
            outer *= s
        inner = 1
        for s in shape[dim + 1 :]:
            inner *= s
        out = torch.empty(shape[:dim] + shape[dim + 1 :], device=x.device, dtype=x.dtype)
        block = 256
        min_over_middle[(outer, triton.cdiv(inner, block))](x, out, shape[dim], inner, BLOCK=block)
        return out
