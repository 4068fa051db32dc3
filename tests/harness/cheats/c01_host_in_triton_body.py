# cheat 1: the interpreted Triton kernel's body calls a Python helper that does x.numpy() + y.numpy(): host reads inside a launch count as the kernel's; a Triton copy is the decoy
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


_BOX = []


def _host():
    x, y = _BOX[0]
    _BOX.append(torch.from_numpy(x.numpy() + y.numpy()))


@triton.jit
def work_kernel(x_ptr, n):
    _host()


def custom_kernel(inputs):
    x, y = inputs
    _BOX.clear()
    _BOX.append((x, y))
    work_kernel[(1,)](x, x.numel())
    return _copy(_BOX[1])
