# cheat 16 (GPU): keep the GPU busy from a process of its own once the timed calls are over, to slow the reference timed next
# problem: vector_add
# options: policy_scan=false bench=true bench_budget_s=1
# expect: run: the flood process got no CUDA context
"""The GPU side of ``cheats/c16_work_left_behind.py``. On its first call the candidate
starts an interpreter of its own (libc's ``system``, past the audit hooks) that would open
a CUDA context of its own, wait until the worker's CPU time stops advancing (the timed
calls over) and launch 20 ms spin kernels without end, so the reference, timed next in
another worker, would look slower (contexts time-slice). Inside the walls that process
gets no CUDA context: the worker refuses bind and listen once its own CUDA is up
(``seccomp.refuse_serving``) and its children inherit that, while the CUDA driver serves a
socket as it starts (error 304 without it; seen on the H200, 2026-12-05), and landlock
grants writes to the worker's own ``/proc/<pid>`` only. The first call waits for the
process's word and fails the run with it. Where a process of the candidate's did get a
context, ``harness/perf/gpuidle.py`` is the next wall: the reference is not timed beside a
busy device, and no speedup is given.
"""

import os
import sys
import time

import torch
import triton
import triton.language as tl

FLOOD = """
import sys, time
import torch

parent = int(sys.argv[1])
try:
    torch.zeros(1, device="cuda")
except Exception as exc:
    with open("flood.state", "w") as fh:
        fh.write(f"no CUDA: {exc}")
    sys.exit(0)
with open("flood.state", "w") as fh:
    fh.write("flooding")


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
    for _ in range(400):  # its word, within 20 s
        if os.path.exists("flood.state"):
            with open("flood.state") as fh:
                state = fh.read()
            if state.startswith("no CUDA"):
                raise RuntimeError(f"the flood process got no CUDA context ({state[:200]})")
            return
        time.sleep(0.05)


def custom_kernel(inputs):
    if not _STARTED:
        _start_flood()
    x, y = inputs
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
