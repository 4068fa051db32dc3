# cheat 1: call the library op the problem forbids (torch.add for vector_add)
# problem: vector_add
# expect: pre-checks: torch.add (forbidden by the problem
import torch


def custom_kernel(inputs):
    x, y = inputs
    return torch.add(x, y)
