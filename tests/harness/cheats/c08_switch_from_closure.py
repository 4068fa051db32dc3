# cheat 8: the original switches taken from the wrappers' closures (switch.__closure__ cell_contents): DisableTorchFunction and _DisableTorchDispatch unwrapped, no violation recorded; a Triton copy is the decoy
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


def _orig(f):
    for c in getattr(f, "__clo" + "sure__", None) or ():
        v = getattr(c, "cell_" + "contents")
        if not callable(v) or getattr(v, "__name__", "") in ("active", "record", "from_candidate"):
            continue
        if getattr(v, "__name__", None) == f.__name__:
            return v
    return f


_nodisp = _orig(getattr(torch._C, "_DisableTorch" + "Dispatch"))
_nofn = _orig(getattr(torch._C, "DisableTorch" + "Function"))


def custom_kernel(inputs):
    x, y = inputs
    with _nofn(), _nodisp():
        tmp = x + y
    return _copy(tmp)
