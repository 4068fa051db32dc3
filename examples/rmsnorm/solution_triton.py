"""Honest Triton RMSNorm: one program per row, the row in one block; any strides."""

import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def rmsnorm_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    n_cols,
    stride_xm,
    stride_xn,
    stride_w,
    stride_out,
    eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    inv = 1.0 / tl.sqrt(mean_sq + eps)
    tl.store(out_ptr + row * stride_out + cols, x * inv * w, mask=mask)


def custom_kernel(inputs):
    x, weight = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n)
    # out is contiguous (empty_like of a view that is not dense is), x and weight any view
    rmsnorm_kernel[(m,)](
        x,
        weight,
        out,
        n,
        x.stride(0),
        x.stride(1),
        weight.stride(0),
        out.stride(0),
        EPS,
        BLOCK=BLOCK,
    )
    return out
