"""An honest KernelBench ModelNew for level1/37_FrobeniusNorm_: partial sums of squares
per block (float32), the partials summed in float64 by one program, then every element
divided by the norm."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def block_squares(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(partial_ptr + pid, tl.sum(x * x, 0))


@triton.jit
def sum_partials(partial_ptr, norm_ptr, count, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], tl.float64)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offs, mask=offs < count, other=0.0).to(tl.float64)
    tl.store(norm_ptr, tl.sqrt(tl.sum(acc, 0)).to(tl.float32))


@triton.jit
def divide(x_ptr, norm_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    norm = tl.load(norm_ptr)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x / norm, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        block = 4096
        blocks = triton.cdiv(n, block)
        partial = torch.empty(blocks, device=x.device, dtype=torch.float32)
        norm = torch.empty(1, device=x.device, dtype=torch.float32)
        out = torch.empty_like(x)
        block_squares[(blocks,)](x, partial, n, BLOCK=block)
        sum_partials[(1,)](partial, norm, blocks, BLOCK=1024)
        divide[(blocks,)](x, norm, out, n, BLOCK=block)
        return out
