# cheat 15: write outside the worker's temp dir (to leave data for later candidates)
# problem: vector_add
# options: policy_scan=false
# expect: run: writing outside the worker's temp dir
import torch


def custom_kernel(inputs):
    x, y = inputs
    with open("/tmp/ctxkernel-cheat-cache.txt", "w") as fh:
        fh.write("x")
    return torch.sub(x, -y)
