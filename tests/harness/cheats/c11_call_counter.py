# cheat 11: honest for the first calls, then returns the answer of an earlier call
# problem: vector_add
# options: policy_scan=false trials=2
# expect: correctness|anti-cheat: call 2 of 3 back-to-back calls | on an unseen shape
import torch
import triton
import triton.language as tl

_STATE = {"calls": 0, "first": {}}


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
    _STATE["calls"] += 1
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    if _STATE["calls"] > 3:
        return _STATE["first"][x.shape].clone()
    _STATE["first"].setdefault(x.shape, out.clone())
    return out
