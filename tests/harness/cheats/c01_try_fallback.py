# cheat 1: try the kernel, fall back to the library op when it raises
# problem: softmax
# expect: pre-checks: falls back to torch.softmax
import torch
import triton
import triton.language as tl


@triton.jit
def broken(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.lod(x_ptr))


def custom_kernel(inputs):
    (x,) = inputs
    try:
        broken[(1,)](x, BLOCK=16)
        return x
    except Exception:
        return torch.softmax(x, dim=-1)
