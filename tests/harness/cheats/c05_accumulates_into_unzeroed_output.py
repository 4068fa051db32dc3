# bad candidate (GPU MODE style, as vectorsum_py's upstream submission does): the kernel adds its
# result to the provided output tensor without zeroing it first; that tensor's content is
# undefined (torch.empty), so the verdict must fail and say why, not only "NaN"
# problem: gpumode_axpy
# expect: run: holds NaN before each call
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def axpy_accumulate_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    acc = tl.load(out_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, acc + 2 * x + y, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, y, out = data
    n = x.numel()
    axpy_accumulate_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
