# cheat 6: scrubs NaN from its input (read as -inf: "a NaN never reaches the output"),
# so a row holding one comes out finite where the reference, which propagates NaN, gives
# NaN; every public trial's input is finite, the non-finite trial's (EDGE_INPUTS) is not
# problem: softmax
# expect: correctness: wrong on inputs holding NaN and +-Inf
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf"))
    x = tl.where(x == x, x, -float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride_out + cols, num / tl.sum(num, axis=0), mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n)
    softmax_kernel[(m,)](x, out, n, x.stride(0), x.stride(1), out.stride(0), BLOCK=BLOCK)
    return out
