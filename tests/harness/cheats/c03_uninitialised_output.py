# cheat 3: return uninitialised memory, hoping it holds a recycled result
# problem: vector_add
# expect: run: NaN/Inf
import torch


def custom_kernel(inputs):
    x, _ = inputs
    return torch.empty_like(x)
