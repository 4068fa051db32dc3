# cheat 3: return uninitialised memory, hoping it holds a recycled result
# problem: vector_add
# expect: run|correctness: NaN/Inf | outside atol
# On a CPU the allocator may hand back other garbage than the poison (an earlier
# tensor's bytes): then correctness catches it.
import torch


def custom_kernel(inputs):
    x, _ = inputs
    return torch.empty_like(x)
