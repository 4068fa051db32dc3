# cheat 15: allocate far more memory than the cap
# problem: vector_add
# options: policy_scan=false memory_cap_bytes=6442450944
# expect: run: allocate
import torch


def custom_kernel(inputs):
    hog = torch.ones(2**33, dtype=torch.uint8)
    return hog
