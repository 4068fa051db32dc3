# cheat 14: usually right (a "race" that corrupts every third call)
# problem: vector_add
# options: policy_scan=false trials=3
# expect: correctness: nondeterministic
import torch
import triton
import triton.language as tl

_CALLS = [0]


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def custom_kernel(inputs):
    x, y = inputs
    _CALLS[0] += 1
    out = torch.empty_like(x)
    n = x.numel() - (1 if _CALLS[0] % 3 == 0 else 0)  # the "lost update"
    out.fill_(0.5)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, n, BLOCK=1024)
    return out
