# cheat 14, the other way round: no race at all -- deterministic, but wrong wherever x is
# above 3.3 (an "overflow guard" that drops y), which the fixed secret's trial 1 reaches
# and trials 2 and 3 do not: the trials disagree because their inputs differ
# problem: vector_add
# options: trials=3 secret=7
# expect: correctness: fails on some inputs
import torch
import triton
import triton.language as tl

LIMIT = 3.3  # max of 1000 normal samples: above it for about half the seeds


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > limit, x, x + y), mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), LIMIT, BLOCK=1024)
    return out
