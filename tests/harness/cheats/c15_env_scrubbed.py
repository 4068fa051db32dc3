# cheat 15: look for secrets or harness data in the environment (there are none: it passes)
# problem: vector_add
# options: policy_scan=false
# expect: none: the environment is scrubbed
import os

import torch
import triton
import triton.language as tl


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
    leaked = [
        k
        for k in os.environ
        if "SECRET" in k or "KEY" in k or (k.startswith("CTXKERNEL_") and k != "CTXKERNEL_WORKER")
    ]
    if leaked:
        raise RuntimeError(f"leaked into the worker: {leaked}")
    x, y = inputs
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
