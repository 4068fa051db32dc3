# cheat 1: a no-op Triton launch, then a library op the reference does not use
# (torch.addcmul) does the whole computation: the op recorder's share of the data read by
# library ops catches it on a CPU (on a GPU: the device time in library kernels)
# problem: gpumode_axpy
# options: policy_scan=false
# expect: anti-cheat: of the work
import torch
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(x_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.load(x_ptr + offsets, mask=offsets < 1)


def custom_kernel(data):
    x, y, out = data
    nothing_kernel[(1,)](x, BLOCK=16)
    torch.addcmul(y, x, torch.full_like(x, 2.0), out=out)
    return out
