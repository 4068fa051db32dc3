# cheat 8: swap the code of torch.nn.functional.softmax (same object, new body)
# problem: vector_add
# options: policy_scan=false
# expect: compile: __code__
import torch
import torch.nn.functional as F


def _fake(*args, **kwargs):
    return args[0]


F.softmax.__code__ = _fake.__code__


def custom_kernel(inputs):
    x, y = inputs
    return torch.sub(x, -y)
