# cheat 9: zero the inputs and return zeros, so a reference computed afterwards agrees
# problem: vector_add
# options: policy_scan=false
# expect: correctness: modified its input #0
import torch


def custom_kernel(inputs):
    x, y = inputs
    x.zero_()
    y.zero_()
    return torch.zeros_like(x)
