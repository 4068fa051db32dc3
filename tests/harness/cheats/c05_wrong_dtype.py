# cheat 5: return float64, which compares equal under loose checks
# problem: vector_add
# options: policy_scan=false
# expect: run: dtype float64, expected float32
import torch


def custom_kernel(inputs):
    x, y = inputs
    return torch.sub(x.double(), -y.double())
