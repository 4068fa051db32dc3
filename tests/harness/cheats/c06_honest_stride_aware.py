# honest counterpart (item 6, edge inputs): a row softmax that reads its input through
# both strides, in column blocks (an online max and sum, then the output), so it is right
# on every edge trial the problem asks for -- padded rows, a step on the last dimension,
# rows of stride 0, an empty batch (returned before any launch: no work, no kernel) and
# NaN/Inf, which the IEEE arithmetic propagates as the reference's does; must pass
# problem: softmax
# expect: none
import torch
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(
    x_ptr, out_ptr, n_cols, stride_xm, stride_xn, stride_om, stride_on, BLOCK: tl.constexpr
):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_xm
    out_row = out_ptr + row * stride_om
    running_max = -float("inf")
    running_sum = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols * stride_xn, mask=cols < n_cols, other=-float("inf"))
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(
            tl.exp(x - new_max), axis=0
        )
        running_max = new_max
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols * stride_xn, mask=mask, other=-float("inf"))
        tl.store(out_row + cols * stride_on, tl.exp(x - running_max) / running_sum, mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty((m, n), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    online_softmax_kernel[(m,)](
        x, out, n, x.stride(0), x.stride(1), out.stride(0), out.stride(1), BLOCK=16
    )
    return out
