# cheat 1 (honest counterpart): a Triton reduction with a small torch epilogue (the division
# by n) written into the data's output tensor, float32 against a float64 reference; must pass
# problem: gpumode_mean64
# expect: none: passes
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    total = torch.empty(1, device=x.device, dtype=torch.float32)
    sum_kernel[(1,)](x, total, x.numel(), BLOCK=1024)
    out.copy_((total / x.numel()).reshape(()))
    return out
