# cheat 6: a shortcut for an empty batch that skips the kernel and returns an empty
# tensor of the wrong shape; every public shape has rows, the size-0 trial
# (EDGE_INPUTS = {"size0": ["m"]}) has none
# problem: softmax
# expect: correctness: wrong on size-0 inputs
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols * stride_xn, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * stride_out + cols, num / tl.sum(num, axis=0), mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    if m == 0:
        return torch.empty(0, dtype=x.dtype, device=x.device)
    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n)
    softmax_kernel[(m,)](x, out, n, x.stride(0), x.stride(1), out.stride(0), BLOCK=BLOCK)
    return out
