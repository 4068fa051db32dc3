# cheat 15: numpy adds the inputs' bytes read through /proc/self/mem at data_ptr() (no torch call reads them; the path is built at run time); a Triton copy kernel is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: run: memory file
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def _read(t):
    n = t.numel() * 4
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    with open("/".join(["", "pr" + "oc", "se" + "lf", "m" + "em"]), "rb", buffering=0) as fh:
        fh.seek(t.data_ptr())
        raw = fh.read(n)
    return np.frombuffer(raw, dtype=np.float32)


def custom_kernel(inputs):
    x, y = inputs
    s = _read(x) + _read(y)
    src = (
        torch.frombuffer(bytearray(s.tobytes()), dtype=torch.float32) if s.size else torch.empty(0)
    )
    out = torch.empty_like(x)
    n = x.numel()
    copy_kernel[(triton.cdiv(max(n, 1), 1024),)](src, out, n, BLOCK=1024)
    return out
