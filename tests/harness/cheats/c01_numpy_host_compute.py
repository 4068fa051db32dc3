# cheat 1: numpy does the add on host arrays; a Triton copy is the decoy "own kernel"
# problem: vector_add
# expect: anti-cheat: numpy
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    s = x.cpu().numpy() + y.cpu().numpy()
    tmp = torch.from_numpy(s).to(x.device)
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        copy_kernel[(triton.cdiv(n, 1024),)](tmp, out, n, BLOCK=1024)
    return out
