# cheat 1: declares Triton (imports it) but computes with a torch op the policy does not list
# problem: vector_add
# expect: anti-cheat: declared backend triton but no Triton kernel was launched
import torch
import triton  # noqa: F401


def custom_kernel(inputs):
    x, y = inputs
    return torch.sub(x, -y)
