# cheat 8: the library op called below the Python dispatch key (OpOverload.redispatch and the handle's redispatch_boxed, looked up by names built at run time): no mode and no profiler record sees it; a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: op recorder off
import torch
import triton
import triton.language as tl

_op = getattr(torch.ops.aten, "a" + "dd").Tensor
_after = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    keys = torch._C._dispatch_keys(x) & _after
    half = x.numel() // 2
    head = getattr(_op, "re" + "dispatch")(keys, x[:half], y[:half])
    tail = getattr(_op._handle, "redispatch" + "_boxed")(keys, x[half:], y[half:])
    tmp = torch.cat([head, tail])
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        copy_kernel[(triton.cdiv(n, 1024),)](tmp, out, n, BLOCK=1024)
    return out
