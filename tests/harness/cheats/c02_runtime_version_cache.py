# cheat 2: replay cache keyed on (data_ptr, _version, shape), hidden from the static scan
# problem: vector_add
# options: policy_scan=false
# expect: correctness: stale result when input content changed in place
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
    key = (x.data_ptr(), x._version, tuple(x.shape))
    hit = _CACHE.get(key)
    if hit is not None:
        return hit.clone()
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    _CACHE[key] = out
    return out.clone()
