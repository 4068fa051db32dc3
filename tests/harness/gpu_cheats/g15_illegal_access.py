# cheat 15 (GPU): a kernel that writes far out of bounds (CUDA illegal memory access)
# problem: vector_add
# options: policy_scan=false
# expect: run: illegal memory access
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    z = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs + (1 << 40), z, mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
