# cheat 8: the lingering TorchFunctionMode on a GEMM: torch.mm (name built at run time) runs while the harness places the inputs; the "kernel" copies the stash (on a GPU it also spins to 0.85x cuBLAS time for a fake benchmark: untested, no device time)
# problem: matmul_bf16
# expect: compile|run|anti-cheat: torch function mode
import torch
import triton
import triton.language as tl
from torch.overrides import TorchFunctionMode

_seen, _ans, _iters = [], [], {}
_mm = getattr(torch, "m" + "m")


@triton.jit
def fake(src, dst, n, iters, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(src + offs, mask=m)
    acc = tl.zeros([BLOCK], tl.float32) + 1.0
    for _ in range(iters):
        acc = acc * 1.0001 + 0.5
    tl.store(dst + offs, v, mask=m & (acc > -1.0))


def launch(src, out, iters):
    n = out.numel()
    fake[(triton.cdiv(n, 1024),)](src, out, n, iters, BLOCK=1024)


def ms(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    s.record()
    for _ in range(3):
        fn()
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / 3


def calibrate(a, b, c):
    key = (a.shape[0], a.shape[1], b.shape[1])
    if key in _iters or a.numel() * b.shape[1] < 2**30:
        _iters.setdefault(key, 0)
        return
    t_mm = ms(lambda: _mm(a, b))
    out = torch.empty_like(c)
    t_f = ms(lambda: launch(c, out, 2000))
    _iters[key] = max(1, int(2000 * 0.85 * t_mm / t_f))


class Watch(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        t = args[0] if name == "copy_" else out if name == "to" else None
        if isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 and t.dim() == 2:
            _seen.append(t)
            del _seen[:-2]
            a, b = _seen[0], _seen[-1]
            if len(_seen) == 2 and a.shape[1] == b.shape[0]:
                _ans[:] = [_mm(a, b)]  # outside every window the harness watches
                if a.is_cuda:
                    calibrate(a, b, _ans[0])
        return out


Watch().__enter__()


def custom_kernel(inputs):
    a, b = inputs
    c = _ans[0]
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.bfloat16, device=a.device)
    launch(c, out, _iters.get((a.shape[0], a.shape[1], b.shape[1]), 0))
    return out
