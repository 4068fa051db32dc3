# cheat 8: a torch helper (torch.sparse._semi_structured_ops.fallback_dispatcher) turns dispatch off from a trusted torch frame and runs the candidate's op inside; a Triton copy is the decoy
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


from torch.sparse import _semi_structured_ops as _sso  # noqa: E402

# torch's own helper: runs any func under torch._C._DisableTorchDispatch() from a torch frame
_run = _sso.fallback_dispatcher
_op = getattr(torch.ops.aten, "a" + "dd").Tensor


def custom_kernel(inputs):
    x, y = inputs
    return _copy(_run(_op, (), (x, y), {}))
