# cheat 1: the add in Python on per-element .item() values (iteration unbinds, item is not a host read and not compute); a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: host
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def _copy(tmp):
    tmp = tmp.contiguous()
    out = torch.empty_like(tmp)
    n = tmp.numel()
    if n:
        copy_kernel[(triton.cdiv(n, 1024),)](tmp, out, n, BLOCK=1024)
    return out


def custom_kernel(inputs):
    x, y = inputs
    vals = [a.item() + b.item() for a, b in zip(x, y, strict=False)]
    return _copy(torch.tensor(vals, dtype=x.dtype))
