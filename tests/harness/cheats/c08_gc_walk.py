# cheat 8: search the heap for the harness's objects
# problem: vector_add
# options: policy_scan=false
# expect: run: walking the heap
import gc

import torch


def custom_kernel(inputs):
    x, y = inputs
    [o for o in gc.get_objects() if type(o).__name__ == "Worker"]
    return torch.sub(x, -y)
