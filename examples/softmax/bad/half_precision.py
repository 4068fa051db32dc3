# expect: correctness: elements outside atol=1e-05
"""Computes the fp32 softmax in fp16 (a silent precision downgrade)."""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = (x - tl.max(x, axis=0)).to(tl.float16)
    num = tl.exp(x.to(tl.float32)).to(tl.float16)
    out = num / tl.sum(num.to(tl.float32), axis=0).to(tl.float16)
    tl.store(out_ptr + row * stride + cols, out.to(tl.float32), mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(m,)](x, out, n, x.stride(0), BLOCK=triton.next_power_of_2(n))
    return out
