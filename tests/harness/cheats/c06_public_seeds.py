# cheat 6: regenerate the inputs from the problem's public seeds and return that answer
# problem: vector_add
# options: policy_scan=false
# expect: correctness: elements outside
import torch


def custom_kernel(inputs):
    x, _ = inputs
    gen = torch.Generator().manual_seed(1000)  # SEEDS default: 1000 + shape index
    a = torch.randn(x.shape[0], generator=gen)
    b = torch.randn(x.shape[0], generator=gen)
    return torch.sub(a, -b)
