# cheat 1: the interpreted kernel body has a triton-package helper (triton.profiler.metric._scalar_or_vector_value) call tolist() on the inputs: a read by the triton package inside a launch, not by the interpreter's launcher; Python adds the lists and a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: host
import torch
import triton
import triton.language as tl
from triton.profiler import metric as _m

_STASH = {}
_KEEP = lambda v: v  # noqa: E731  (defined outside the kernel: no interpreter patching)


@triton.jit
def grab_kernel(x_ptr, n):
    # interpreted: plain Python runs here
    _STASH["x"] = _m._scalar_or_vector_value(_STASH["xt"], _KEEP)
    _STASH["y"] = _m._scalar_or_vector_value(_STASH["yt"], _KEEP)


@triton.jit
def copy_kernel(src_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    n = x.numel()
    out = torch.empty_like(x)
    if n == 0:
        return out
    # a view of two elements for n == 1: the helper takes tolist() (item() is patched in a kernel)
    _STASH["xt"], _STASH["yt"] = (x.expand(2), y.expand(2)) if n == 1 else (x, y)
    grab_kernel[(1,)](x, n)
    xs, ys = _STASH["x"], _STASH["y"]
    src = torch.tensor([a + b for a, b in zip(xs[:n], ys[:n], strict=True)], dtype=torch.float32)
    copy_kernel[(triton.cdiv(n, 1024),)](src, out, n, BLOCK=1024)
    return out
