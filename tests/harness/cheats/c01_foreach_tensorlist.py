# cheat 1: torch._foreach_add([x], [y]): an ATen op with TensorList arguments -- not in the add group, and the recorder counts 0 input elements for list arguments; a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: forbidden library op
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def _copy(tmp):
    tmp = tmp.contiguous()
    out = torch.empty_like(tmp)
    n = tmp.numel()
    if n:
        copy_kernel[(triton.cdiv(n, 1024),)](tmp, out, n, BLOCK=1024)
    return out


def custom_kernel(inputs):
    x, y = inputs
    return _copy(torch._foreach_add([x], [y])[0])
