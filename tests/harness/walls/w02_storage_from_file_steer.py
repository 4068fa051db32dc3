# wall: a shared storage mapped from a file the agent reads later (its steer.md)
# expect: run: Read-only file system | Permission denied | No such file
import torch


def custom_kernel(inputs):
    x, y = inputs
    storage = torch.UntypedStorage.from_file("__RUNS_DIR__/steer.md", shared=True, nbytes=64)
    storage[0] = 33
    return x + y
