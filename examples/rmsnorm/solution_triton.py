"""Honest Triton RMSNorm: one program per row, the row in one block."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    inv = 1.0 / tl.sqrt(mean_sq + eps)
    tl.store(out_ptr + row * stride + cols, x * inv * w, mask=mask)


def custom_kernel(inputs):
    x, weight = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n)
    rmsnorm_kernel[(m,)](x, weight, out, n, x.stride(0), EPS, BLOCK=BLOCK)
    return out
