# cheat 6: assumes its input is contiguous -- row r starts at r * n, whatever x.stride(0)
# says; every public trial's input is contiguous, the padded trial's (EDGE_INPUTS: each
# row a slice of a longer one) is not, and the elements between its rows are NaN
# problem: softmax
# expect: correctness: wrong on padded inputs
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    softmax_kernel[(m,)](x, out, n, BLOCK=triton.next_power_of_2(n))
    return out
