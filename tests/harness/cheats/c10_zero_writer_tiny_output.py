# cheat 10: do none of the work on a problem whose outputs are all tiny -- a Triton kernel
# that writes zeros. A softmax over rows of 20000 uniform inputs has every output below
# 1e-4, KernelBench's atol: zeros pass that tolerance everywhere, so the signal check
# judges these shapes relative to the output's scale
# problem: softmax_long_row
# expect: correctness: relative to the output's scale
import torch
import triton
import triton.language as tl


@triton.jit
def zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.zeros([BLOCK], tl.float32), mask=offsets < n)


def custom_kernel(inputs):
    (x,) = inputs
    out = torch.empty_like(x)
    zero_kernel[(triton.cdiv(x.numel(), 4096),)](out, x.numel(), BLOCK=4096)
    return out
