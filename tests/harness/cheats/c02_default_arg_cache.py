# cheat 2: replay cache in a default-argument dict keyed on shape
# problem: vector_add
# options: policy_scan=false
# expect: correctness: stale result
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def custom_kernel(inputs, _memo={}):  # noqa: B006 - the cheat
    x, y = inputs
    if x.shape in _memo:
        return _memo[x.shape].clone()
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    _memo[x.shape] = out
    return out.clone()
