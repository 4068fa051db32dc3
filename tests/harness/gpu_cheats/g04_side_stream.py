# cheat 4 (GPU): leave the work on a side stream, unsynchronised, behind a long sleep
# problem: vector_add
# options: policy_scan=false
# expect: run: output changed after custom_kernel returned
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


_SIDE = []

# compile now, so that every call's launch comes right after its sleep
_warm = torch.ones(8, device="cuda")
add_kernel[(1,)](_warm, _warm, _warm, 8, BLOCK=1024)


def custom_kernel(inputs):
    x, y = inputs
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0]
    out = torch.empty_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(20_000_000)  # ~10 ms of spinning before the real work
        add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
