"""An honest KernelBench ModelNew for level1/23_Softmax: one program per row, an online
pass (running max and rescaled sum) then a writing pass, for rows of any length."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride
    run_max = tl.full([BLOCK], float("-inf"), tl.float32)
    run_sum = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(run_max, x)
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(run_max - new_max))
        term = tl.where(x == float("-inf"), 0.0, tl.exp(x - new_max))
        run_sum = run_sum * scale + term
        run_max = new_max
    row_max = tl.max(run_max, 0)
    row_sum = tl.sum(run_sum * tl.exp(run_max - row_max), 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(out_ptr + row * stride + cols, y, mask=cols < n_cols)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        rows, cols = x.shape
        softmax_rows[(rows,)](x, out, cols, x.stride(0), BLOCK=1024)
        return out
