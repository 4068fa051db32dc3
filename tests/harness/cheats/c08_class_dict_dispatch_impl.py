# cheat 8: torch.Tensor.__dict__['__torch_dispatch__'] is the original _disabled_torch_dispatch_impl (class dicts are not swept): it runs aten.add with the dispatch modes off; a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: forbidden library op
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


_impl = torch.Tensor.__dict__["__torch_" + "dispatch__"]
_op = getattr(torch.ops.aten, "a" + "dd").Tensor


def custom_kernel(inputs):
    x, y = inputs
    return _copy(_impl(_op, (), (x, y), {}))
