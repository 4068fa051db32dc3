# cheat 8: the Python key taken out of the TLS include set (_dispatch_tls_set_dispatch_key_included, not a watched switch) around an aten op, put back before return; a Triton copy is the decoy
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


_K = torch._C.DispatchKey


def custom_kernel(inputs):
    x, y = inputs
    inc = torch._C._dispatch_tls_is_dispatch_key_included
    setinc = torch._C._dispatch_tls_set_dispatch_key_included
    saved = {k: inc(k) for k in (_K.Python, _K.PythonTLSSnapshot)}
    for k in saved:
        setinc(k, False)
    try:
        tmp = getattr(torch.ops.aten, "a" + "dd").Tensor(x, y)
    finally:
        for k, v in saved.items():
            setinc(k, v)
    return _copy(tmp)
