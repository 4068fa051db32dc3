# cheat 8: a TorchFunctionMode pushed at import and left on the stack computes x + y while the harness places the inputs (copy_), outside the recorder's and the profiler's window; the kernel copies the stash
# problem: vector_add
# expect: compile|run|anti-cheat: torch function mode
import torch
import triton
import triton.language as tl
from torch.overrides import TorchFunctionMode

_placed = []
_answer = []


class Watch(TorchFunctionMode):
    """Left on the mode stack after import: sees the harness place each input."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") == "copy_" and args[0].is_floating_point():
            _placed.append(args[0])
            del _placed[:-2]
            if len(_placed) == 2 and _placed[0].shape == _placed[1].shape:
                _answer[:] = [_placed[0] + _placed[1]]  # outside the op recorder's window
        return out


Watch().__enter__()


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


def custom_kernel(inputs):
    x, _y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        copy_kernel[(triton.cdiv(n, 1024),)](_answer[0], out, n, BLOCK=1024)
    return out
