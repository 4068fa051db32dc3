# expect: run: shares memory with input #0
"""Normalises x in place and returns it (the output aliases an input)."""

import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(x_ptr + row * stride + cols, x * inv * w, mask=mask)


def custom_kernel(inputs):
    x, weight = inputs
    m, n = x.shape
    rmsnorm_kernel[(m,)](x, weight, n, x.stride(0), 1e-6, BLOCK=triton.next_power_of_2(n))
    return x
