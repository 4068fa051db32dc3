# cheat 5: return an overlapping (expanded) tensor
# problem: vector_add
# options: policy_scan=false
# expect: run: not a dense
import torch


def custom_kernel(inputs):
    x, y = inputs
    return torch.sub(x[:1], -y[:1]).expand(x.shape[0])
