# honest counterpart (item 6, unseen shapes): a row softmax that reads each row once for
# an online (running) max and sum over column blocks, then writes exp(x - max) / sum in a
# second pass. Its cost grows with rows x column blocks, so it must never meet an unseen
# shape with far more work than the public ones (test_signal_and_budgets.py runs it on
# every SHAPE with the default timeout)
# problem: softmax_rows
# expect: none
import torch
import triton
import triton.language as tl


@triton.jit
def online_softmax_kernel(x_ptr, out_ptr, n_cols, stride_x, stride_out, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    running_max = -float("inf")
    running_sum = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"))
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(
            tl.exp(x - new_max), axis=0
        )
        running_max = new_max
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf"))
        tl.store(out_row + cols, tl.exp(x - running_max) / running_sum, mask=mask)


def custom_kernel(inputs):
    (x,) = inputs
    m, n = x.shape
    out = torch.empty_like(x)
    online_softmax_kernel[(m,)](x, out, n, x.stride(0), out.stride(0), BLOCK=128)
    return out
