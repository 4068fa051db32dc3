# cheat 16 (GPU): keep the GPU busy from a process of its own once the timed calls are over, to slow the reference timed next
# problem: vector_add
# options: policy_scan=false bench=true bench_budget_s=1
# expect: none: the GPU stayed busy
"""The GPU side of ``cheats/c16_work_left_behind.py``. On its first call the candidate
starts an interpreter of its own (libc's ``system``, past the audit hooks) with a CUDA
context of its own; it waits until the worker's CPU time stops advancing (the timed calls
are over) and then launches 20 ms spin kernels without end. Contexts time-slice: the
reference, timed next in another worker, would look slower. The harness stops the
candidate's processes while the reference is timed, but their queued kernels (a launch
queue of about a thousand, some 20 s of work) run on: the device is not seen idle within
``gpuidle.IDLE_TIMEOUT_S``, the reference is not timed beside them and the verdict gives
no speedup, naming why (it does not fail: on a shared GPU the busy work may be another
user's).
"""

import os
import sys

import torch
import triton
import triton.language as tl

FLOOD = """
import sys, time
import torch

parent = int(sys.argv[1])


def ticks():
    try:
        with open(f"/proc/{parent}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        sys.exit(0)
    return int(fields[11]) + int(fields[12])


side = torch.cuda.Stream()
last, quiet = ticks(), 0
while quiet < 5:  # the worker idle for 100 ms
    time.sleep(0.02)
    now = ticks()
    quiet, last = (quiet + 1 if now == last else 0), now
with torch.cuda.stream(side):
    while True:
        torch.cuda._sleep(40_000_000)
"""
_STARTED: list[int] = []


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def _start_flood() -> None:
    with open("flood.py", "w") as fh:
        fh.write(FLOOD)
    libc = sys.modules["ctypes"].CDLL(None)
    command = f"( exec '{sys.executable}' flood.py {os.getpid()} ) >/dev/null 2>&1 &"
    libc.system(command.encode())
    _STARTED.append(1)


def custom_kernel(inputs):
    if not _STARTED:
        _start_flood()
    x, y = inputs
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
