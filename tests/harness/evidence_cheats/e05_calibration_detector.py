# cheat e05 (GPU): a calibration-phase detector, slow only while calibrated
# problem: vector_add
# options: policy_scan=false bench=true
# expect: none: passes, timed no fewer times and no faster than the honest kernel
# An honest vector add that is slow only while the benchmark calibrates:
# under the op recorder (the first warm-up calls), under the kernel profiler (the witness),
# and for its first calls at the bench shape (the warm-up that sizes the launch lead and the
# timed calls the wall budget is scaled from) it sleeps on the host and runs its kernel
# four times. Against a protocol that sets its number of runs from a calibration estimate it
# would be timed fewer times; here the floor of timed samples holds whatever the budget, the
# budget only grows with slow first calls, and the median of the timed calls is its real
# time: it passes, with at least MIN_TIMED_SAMPLES runs and no better median than honest.
import time

import torch
import triton
import triton.language as tl

_STATE = {"big_calls": 0}
BIG = 1 << 24  # the bench shape (2**28), never a checked one
CALIBRATION_CALLS = 24  # warm-up (>= 5 calls, 0.25 s), the witness's 12, the budget's 5


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def calibrating() -> bool:
    """Whether this call looks like part of the benchmark's calibration."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    profiled = getattr(torch.autograd, "_profiler_enabled", lambda: False)()
    recorded = _get_current_dispatch_mode() is not None
    return profiled or recorded or _STATE["big_calls"] <= CALIBRATION_CALLS


def custom_kernel(inputs):
    x, y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    repeats = 1
    if n >= BIG:
        _STATE["big_calls"] += 1
        if calibrating():
            time.sleep(0.003)
            repeats = 4
    for _ in range(repeats):
        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
