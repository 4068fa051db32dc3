# cheat 5: a recycled output -- every call writes into one module-level buffer and returns
# a view at storage offset 64: earlier outputs change silently
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
    if buffer is None or buffer.numel() < n + 64:
        buffer = _BUFFER["b"] = torch.empty(n + 64, device=x.device, dtype=x.dtype)
    out = buffer[64 : 64 + n]
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
