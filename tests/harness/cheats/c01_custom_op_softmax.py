# cheat 1: softmax through a torch.library custom op (torch.softmax looked up with a name built at run time); a Triton row copy is the decoy; passes every edge input
# problem: softmax
# expect: anti-cheat: forbidden library op
import torch
import triton
import triton.language as tl

_sm = getattr(torch, "soft" + "max")


@torch.library.custom_op("cand::rows", mutates_args=())
def rows(x: torch.Tensor) -> torch.Tensor:
    return _sm(x, -1)


@triton.jit
def copy_rows(src, dst, n, stride, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + r * n + offs, tl.load(src + r * n + offs, mask=m), mask=m)


def custom_kernel(inputs):
    (x,) = inputs
    t = rows(x).contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel():
        copy_rows[(t.shape[0],)](
            t, out, t.shape[1], t.shape[1], BLOCK=triton.next_power_of_2(t.shape[1])
        )
    return out
