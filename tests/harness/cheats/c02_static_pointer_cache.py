# cheat 2: replay cache keyed on data_ptr in a global dict
# problem: vector_add
# expect: pre-checks: replay cache
import torch
import triton
import triton.language as tl

_CACHE = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def custom_kernel(inputs):
    x, y = inputs
    key = (x.data_ptr(), y.data_ptr())
    if key in _CACHE:
        return _CACHE[key]
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    _CACHE[key] = out
    return out
