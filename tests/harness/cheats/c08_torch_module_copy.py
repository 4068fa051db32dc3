# cheat 8: torch/utils/_python_dispatch.py executed again as a new module: its frames carry torch's filename, so its _disable_current_modes is trusted; a Triton copy is the decoy
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


import importlib.util  # noqa: E402

# a second copy of torch's own module, executed from torch's file: its frames carry
# torch's filename, so its calls of the wrapped switches are trusted
_path = importlib.util.find_spec("torch.utils._python" + "_dispatch").origin
_spec = importlib.util.spec_from_file_location("_pd_copy", _path)
_pd = importlib.util.module_from_spec(_spec)
import sys  # noqa: E402

getattr(sys, "mod" + "ules").__setitem__("_pd_copy", _pd)
_spec.loader.exec_module(_pd)
_off = getattr(_pd, "_disable_current" + "_modes")
_op = getattr(torch.ops.aten, "a" + "dd").Tensor


def custom_kernel(inputs):
    x, y = inputs
    with _off():
        tmp = _op(x, y)
    return _copy(tmp)
