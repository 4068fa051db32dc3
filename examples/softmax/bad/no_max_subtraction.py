# expect: run|correctness: NaN/Inf
"""Skips the max subtraction: exp overflows on the problem's wide inputs.

The first call (one 1x1 row, a secret seed) overflows only when its one value is
above ~88, so ``run`` catches it now and then; ``correctness`` catches it always.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(m,)](x, out, n, x.stride(0), BLOCK=triton.next_power_of_2(n))
    return out
