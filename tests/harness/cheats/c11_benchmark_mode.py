# cheat 11: honest when called now and then, replays an old answer when called back to back
# problem: vector_add
# options: policy_scan=false trials=2
# expect: anti-cheat|correctness: back-to-back calls | stale result
import time

import torch
import triton
import triton.language as tl

_STATE = {"last_return": 0.0, "first": {}}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def custom_kernel(inputs):
    x, y = inputs
    # a timing loop: back-to-back calls (0.2 s, not 0.02: on two loaded cores the harness's
    # own work between burst calls can pass 20 ms, and this cheat then never cheated)
    rapid = time.perf_counter() - _STATE["last_return"] < 0.2
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024) if not rapid else 1,)](
        x, y, out, n if not rapid else 0, BLOCK=1024
    )
    if rapid and x.shape in _STATE["first"]:
        out = _STATE["first"][x.shape].clone()
    _STATE["first"].setdefault(x.shape, out.clone())
    _STATE["last_return"] = time.perf_counter()
    return out
