# cheat 5: a recycled output through as_strided at storage offset 0 -- every call returns
# a fresh-looking tensor object over the same memory
# problem: vector_add
# options: policy_scan=false
# expect: correctness|anti-cheat: shares storage with the output of an earlier call | an earlier call changed
import torch
import triton
import triton.language as tl

_BUFFER = {}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


def custom_kernel(inputs):
    x, y = inputs
    n = x.numel()
    buffer = _BUFFER.get("b")
    if buffer is None or buffer.numel() < n:
        buffer = _BUFFER["b"] = torch.empty(1 << 20, device=x.device, dtype=x.dtype)
    out = torch.as_strided(buffer, (n,), (1,), 0)
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
