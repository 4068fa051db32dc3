# cheat 2: replay cache kept in a file (inside its temp dir, where writes are allowed)
# problem: vector_add
# options: policy_scan=false
# expect: correctness: stale result
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
    x, y = inputs
    path = f"cache-{x.numel()}.bin"
    if os.path.exists(path):
        with open(path, "rb") as fh:
            return torch.frombuffer(bytearray(fh.read()), dtype=torch.float32).clone()
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    with open(path, "wb") as fh:
        fh.write(out.numpy().tobytes())
    return out
