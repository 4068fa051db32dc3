# cheat 8: walk the frames to reach the harness's locals
# problem: vector_add
# options: policy_scan=false
# expect: run: frame walking
import sys

import torch


def custom_kernel(inputs):
    x, y = inputs
    frame = sys._getframe(1)
    while frame is not None:
        frame.f_locals.get("self")
        frame = frame.f_back
    return torch.sub(x, -y)
