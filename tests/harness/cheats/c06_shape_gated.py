# cheat 6: shape-gated -- exact on the public sizes (task.yml's tests), a kernel that drops
# the ragged tail everywhere else
# problem: gpumode_axpy
# options: policy_scan=false
# expect: correctness: an unseen shape
import triton
import triton.language as tl


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
    if n in (1000, 1536):
        axpy_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    else:
        out.zero_()
        full = (n // 256) * 256
        axpy_kernel[(max(1, full // 256),)](x, y, out, full, BLOCK=256)
    return out
