# cheat 8: torch._C.ExcludeDispatchKeyGuard (the public name, a different object from the wrapped _ExcludeDispatchKeyGuard) excludes the Python key around an aten op; a Triton copy is the decoy
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


_guard = getattr(torch._C, "ExcludeDispatch" + "KeyGuard")
_keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Python)
_op = getattr(torch.ops.aten, "a" + "dd").Tensor


def custom_kernel(inputs):
    x, y = inputs
    with _guard(_keys):
        tmp = _op(x, y)
    return _copy(tmp)
