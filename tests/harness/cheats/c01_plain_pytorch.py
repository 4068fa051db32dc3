# cheat 1: library passthrough -- plain PyTorch (no kernel of its own) on a problem that
# forbids nothing; accepted only with --backend torch (c04_honest_torch_compile)
# problem: gpumode_axpy
# options: policy_scan=false
# expect: anti-cheat: no custom kernel | which the reference computes
import torch


def custom_kernel(data):
    x, y, out = data
    return torch.add(y, x, alpha=2, out=out)
