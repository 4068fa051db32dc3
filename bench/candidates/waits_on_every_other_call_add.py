"""Planted for the GPU validation: a correct Triton vector add that waits for the GPU
(``torch.cuda.synchronize()``) on every other call. A call that waits is never covered by
the lead, so the benchmark lengthens the lead to its cap (dropping at most 8 calls), then
counts every call and says so: the candidate cannot get its slow calls dropped for good.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


_CALLS = [0]


def custom_kernel(inputs):
    x, y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    _CALLS[0] += 1
    if _CALLS[0] % 2:
        torch.cuda.synchronize()  # this call waits for its own kernel
    return out
