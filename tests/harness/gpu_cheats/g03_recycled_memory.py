# cheat 3 (GPU): return an uninitialised CUDA buffer, hoping the caching allocator hands back a result
# problem: vector_add
# options: policy_scan=false
# expect: run: NaN/Inf
import torch


def custom_kernel(inputs):
    x = inputs[0]
    scratch = torch.empty_like(x)
    del scratch
    return torch.empty_like(x)
