# cheat 16: leave work running after the call, to slow the reference timed next (the speedup inflates)
# problem: vector_add
# options: policy_scan=false
# expect: none: on the CPU nothing is timed; a benchmark stops the whole tree while the reference is timed
"""The candidate's worker stays alive while the parent times the reference in a worker of
its own: work the candidate leaves running then competes with the reference, which looks
slower, and its inflated time would be cached for every later candidate. Left behind on
the first call, each burning a CPU core for ``BURN_S`` seconds:

- a native thread: libc's ``pthread_create`` through ``sys.modules["ctypes"]`` (the audit
  hooks see no thread start; ``threading`` does not know it);
- a forked child (libc's ``fork``, not ``os.fork``), which calls ``setsid()``: out of the
  worker's session and process group;
- an orphan: a shell (libc's ``system``) that starts a background interpreter and exits
  (the interpreter is adopted by the launcher, a subreaper, or by the namespace's init).

Each writes a line (``thread``, ``setsid``, ``orphan``: what it is, its PID as the worker
sees it) to ``burners.txt`` in the worker's folder, for a test to see that all three ran.
"""

import gc
import os
import sys
import time

import torch
import triton
import triton.language as tl

BURN_S = 120.0  # ended sooner with the tree, when its check ends
_STARTED: list[object] = []


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(
        out_ptr + offs,
        tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
        mask=mask,
    )


def _burn_here(seconds: float) -> None:
    """In a forked child, whose one thread is the one that forked: nothing that could
    wait on a lock another thread of the worker held at the fork."""
    gc.disable()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    os._exit(0)


def _leave_work_behind() -> list[str]:
    ctypes = sys.modules["ctypes"]
    libc = ctypes.CDLL(None)
    held = ctypes.PyDLL(None)  # fork with the GIL held: the child's one thread owns it
    buf = ctypes.create_string_buffer(1 << 16)

    @ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    def spin(_):
        end = time.monotonic() + BURN_S
        while time.monotonic() < end:
            libc.memset(buf, 0, len(buf))  # the GIL is let go in each call
        return None

    # the fork comes first, before the spinning thread exists: a fork while that thread
    # waits for the GIL copies the GIL's mutex locked, and the child's first GIL release
    # (a ctypes call through CDLL, or the eval loop dropping it on the thread's request)
    # then waits forever (seen: 1 run in 5 on two cores)
    child = held.fork()
    if child == 0:
        held.setsid()  # PyDLL: the GIL is kept, never released and taken again
        _burn_here(BURN_S)
    lines = [f"setsid {child}"]

    thread = ctypes.c_ulong()
    libc.pthread_create(ctypes.byref(thread), None, spin, None)
    _STARTED.append(spin)  # the callback must outlive the thread
    lines.insert(0, f"thread {os.getpid()}")

    # a shell started by libc's system() (not os.system), which leaves a background
    # interpreter behind and exits: an orphan (no fork in a forked child, whose locks
    # another thread of the worker may have held at the fork)
    burn = f"import time\nend = time.monotonic() + {BURN_S}\nwhile time.monotonic() < end: pass"
    libc.system(f"( exec '{sys.executable}' -I -S -c '{burn}' ) >/dev/null 2>&1 &".encode())
    lines.append("orphan")
    return lines


def custom_kernel(inputs):
    if not _STARTED:
        lines = _leave_work_behind()
        with open("burners.txt", "a") as fh:
            fh.write("".join(f"{line}\n" for line in lines))
    x, y = inputs
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
