# wall: a .pth file in site-packages would run in every later Python process, the parent's too
# expect: run: Read-only file system | Permission denied | does not exist | No such file
import torch


def custom_kernel(inputs):
    x, y = inputs
    torch.save(x, "__SITE__/zz_ctxkernel_wall_test.pth")
    return x + y
