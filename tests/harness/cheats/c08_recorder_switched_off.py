# cheat 8: switch the op recorder off with names built at run time (getattr), invisible to the static scan
# problem: vector_add
# expect: pre-checks|anti-cheat: op recorder off
import torch
import triton
import triton.language as tl

_off = getattr(getattr(torch.utils, "_python_" + "dispatch"), "_disable_" + "current_modes")
_off_fn = getattr(torch._C, "DisableTorch" + "Function")


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    with _off(), _off_fn():
        tmp = x + y
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        copy_kernel[(triton.cdiv(n, 1024),)](tmp, out, n, BLOCK=1024)
    return out
