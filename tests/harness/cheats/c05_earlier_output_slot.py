# cheat 5: GPU MODE data -- the result is written into the output tensor of an EARLIER call
# (kept from then) and that is returned, not this call's own output tensor
# problem: gpumode_axpy
# options: policy_scan=false
# expect: correctness|anti-cheat: shares storage with the output of an earlier call | an earlier call changed
import triton
import triton.language as tl

_KEPT = {}


@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out_ptr + offsets,
        2 * tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
        mask=mask,
    )


def custom_kernel(data):
    x, y, out = data
    n = x.numel()
    kept = _KEPT.get(n)
    if kept is None:
        kept = _KEPT[n] = out
    axpy_kernel[(triton.cdiv(n, 1024),)](x, y, kept, n, BLOCK=1024)
    return kept
