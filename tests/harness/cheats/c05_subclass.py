# cheat 5: return a lazy tensor subclass that computes during the comparison
# problem: vector_add
# options: policy_scan=false
# expect: run: subclass
import torch


class Lazy(torch.Tensor):
    pass


def custom_kernel(inputs):
    x, y = inputs
    return torch.sub(x, -y).as_subclass(Lazy)
