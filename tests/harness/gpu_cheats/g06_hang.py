# cheat 6 (GPU): a kernel that never finishes -- spins on a flag nothing sets; the verdict
# must come within the run timeout (+10 s), not after a long first-call allowance
# problem: vector_add
# options: policy_scan=false timeout_s=10
# expect: compile|run: timed out after
import torch
import triton
import triton.language as tl


@triton.jit
def spin_kernel(flag_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    while tl.load(flag_ptr) == 0:
        tl.store(out_ptr + offsets, tl.zeros((BLOCK,), dtype=tl.float32), mask=offsets < n)


def custom_kernel(inputs):
    x, _y = inputs
    out = torch.empty_like(x)
    flag = torch.zeros(1, device=x.device, dtype=torch.int32)
    spin_kernel[(triton.cdiv(x.numel(), 1024),)](flag, out, x.numel(), BLOCK=1024)
    return out
