# cheat 4 (honest counterpart): upstream vectorsum's style, torch.compile(mode="reduce-overhead")
# of PyTorch code (its threads, hooks and RNG wrappers are torch's), checked as PyTorch
# problem: gpumode_mean64
# options: backend=torch
# expect: none: passes
import torch
from task import input_t, output_t


def _custom_kernel(data: input_t) -> output_t:
    x, output = data
    output[...] = x.sum() / x.numel()
    return output


custom_kernel = torch.compile(_custom_kernel, mode="reduce-overhead")
