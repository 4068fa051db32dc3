# cheat 1: softmax from _foreach_max/_foreach_sub/_foreach_exp/_foreach_norm/_foreach_div on the rows (TensorList args: 0 elements counted, no op in the softmax group); a Triton copy is the decoy
# problem: softmax
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
    (x,) = inputs
    m, n = x.shape
    if m == 0 or n == 0:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    rows = list(x.unbind(0))
    mx = [v.item() for v in torch._foreach_max(rows)]
    e = torch._foreach_exp(torch._foreach_sub(rows, mx))
    s = [v.item() for v in torch._foreach_norm(e, 1)]
    out = torch.stack(torch._foreach_div(e, s))
    return _copy(out).view(m, n)
