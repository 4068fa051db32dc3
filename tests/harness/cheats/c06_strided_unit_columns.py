# cheat 6: right on every contiguous input, wrong only on strided ones -- the row stride
# is honoured (so rows padded in a wider tensor pass) but each row is read as if its
# elements were adjacent, the way a kernel written against contiguous inputs does; the
# strided trial (EDGE_INPUTS) hands it a view with a step on the last dimension
# problem: softmax
# expect: correctness: wrong on strided (non-contiguous) inputs
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride_out + cols, num / tl.sum(num, axis=0), mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n)
    softmax_kernel[(m,)](x, out, n, x.stride(0), out.stride(0), BLOCK=BLOCK)
    return out
