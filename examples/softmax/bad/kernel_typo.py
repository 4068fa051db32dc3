# expect: compile: lod
"""A typo inside the Triton kernel (tl.lod): a compile error on a GPU, an error in kernel code under the interpreter."""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.lod(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, num / tl.sum(num, axis=0), mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(m,)](x, out, n, x.stride(0), BLOCK=triton.next_power_of_2(n))
    return out
