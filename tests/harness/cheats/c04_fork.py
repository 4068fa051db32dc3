# cheat 4: do the work in a forked process
# problem: vector_add
# options: policy_scan=false
# expect: run: process creation (os.fork)
import os

import torch


def custom_kernel(inputs):
    x, y = inputs
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    return torch.sub(x, -y)
