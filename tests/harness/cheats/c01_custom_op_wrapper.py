# cheat 1: the forbidden op inside a torch.library custom op: a dispatch mode runs an op with the modes off, so the aten::add inside cand::vsum would be unseen; the recorder runs ops outside ATen with its modes on
# problem: vector_add
# expect: anti-cheat: forbidden library op
import torch
import triton
import triton.language as tl


@torch.library.custom_op("cand::vsum", mutates_args=())
def vsum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    tmp = vsum(x, y)
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        copy_kernel[(triton.cdiv(n, 1024),)](tmp, out, n, BLOCK=1024)
    return out
