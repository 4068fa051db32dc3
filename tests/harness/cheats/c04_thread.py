# cheat 4: leave the work to a background thread
# problem: vector_add
# options: policy_scan=false
# expect: run: thread creation
import threading

import torch


def custom_kernel(inputs):
    x, y = inputs
    out = torch.empty_like(x)
    threading.Thread(target=lambda: out.copy_(torch.sub(x, -y))).start()
    return out
