# cheat 1: a decoy -- the library computes the result and a Triton "epilogue" copies it into
# the output, so a kernel of the declared backend did launch; the problem forbids nothing
# problem: gpumode_axpy
# options: policy_scan=false
# expect: anti-cheat: which the reference computes
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def custom_kernel(data):
    x, y, out = data
    result = 2 * x + y
    n = out.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](result, out, n, BLOCK=1024)
    return out
