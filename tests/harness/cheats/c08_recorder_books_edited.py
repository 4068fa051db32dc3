# cheat 8: x + y runs in plain sight, then the recorder's own counters (closure cells of the modes on the stacks, torch._C._get_dispatch_stack_at) are edited to forget it; a Triton copy is the decoy
# problem: vector_add
# options: policy_scan=false
# expect: anti-cheat: add
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


def _cells(mode):
    out = {}
    fn = type(mode).__dict__.get("__torch_dispatch__") or type(mode).__dict__.get(
        "__torch_function__"
    )
    for name, c in zip(
        getattr(fn, "__co" + "de__").co_freevars, getattr(fn, "__clo" + "sure__"), strict=False
    ):
        out[name] = getattr(c, "cell_" + "contents")
    return out


def custom_kernel(inputs):
    x, y = inputs
    tmp = x + y
    for i in range(torch._C._len_torch_dispatch_stack()):
        m = torch._C._get_dispatch_stack_at(i)
        books = _cells(m)
        for key in ("aten", "elements", "seconds"):
            d = books.get(key)
            if d is not None:
                for k in list(d):
                    if "add" in k:
                        del d[k]
    for i in range(torch._C._len_torch_function_stack()):
        m = torch._C._get_function_stack_at(i)
        books = _cells(m)
        d = books.get("functions")
        if d is not None:
            for k in list(d):
                if "add" in k:
                    del d[k]
    return _copy(tmp)
