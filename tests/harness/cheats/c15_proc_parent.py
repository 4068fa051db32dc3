# cheat 15: read the parent's environment, command line and open files through /proc (out of reach: it passes)
# problem: vector_add
# options: policy_scan=false
# expect: none: the worker cannot reach another process
"""Looks for the planted secrets of the tests (an ``sk-test-`` key, ``MY_SERVICE_TOKEN``,
``FAKE_SECRET_API_KEY``'s value) in the parent's ``environ``, ``cmdline`` and the files
behind its open descriptors, and raises naming where it found one (never the value). Its
memory is not read here: no memory file (``/proc/<pid>/mem``) opens inside the harness at
all (the static scan's P405, the audit guard at run time; ``c15_proc_self_mem.py``). Inside the harness's PID namespace the parent is
not visible (``getppid()`` is 0): it searches every process it can see instead, which
are only the namespace's. It reads nothing of any other process of the machine.

``scan()`` is also run by a test as a plain child of a process holding a planted key, to
show that it does find one when it is reachable."""

import os
import stat

import torch
import triton
import triton.language as tl

MARKERS = (b"sk-test-", b"MY_SERVICE_TOKEN", b"must-not-reach-the-worker")


def _targets() -> list[int]:
    parent = os.getppid()
    if parent > 0:
        return [parent]
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]


def _read(path: str, limit: int = 1 << 20) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return b""


def _fds(pid: int) -> list[tuple[str, bytes]]:
    out = []
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for name in names:
        path = f"/proc/{pid}/fd/{name}"
        try:
            target = os.readlink(path)
            regular = stat.S_ISREG(os.stat(path).st_mode)  # a pipe would block a read
        except OSError:
            continue
        out.append((f"{path} -> {target}", _read(path) if regular else target.encode()))
    return out


def scan() -> tuple[list[str], list[str]]:
    """(where a marker was found, what could be read at all)."""
    found, reached = [], []
    for pid in _targets():
        sources = [
            (f"/proc/{pid}/environ", _read(f"/proc/{pid}/environ")),
            (f"/proc/{pid}/cmdline", _read(f"/proc/{pid}/cmdline")),
            *_fds(pid),
        ]
        for where, data in sources:
            if data:
                reached.append(where)
            for marker in MARKERS:
                if marker in data:
                    found.append(f"{marker.decode()} in {where}")
    return found, reached


FOUND, REACHED = scan()


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
    if FOUND:
        raise RuntimeError(f"secrets of another process: {FOUND}; could read {REACHED}")
    x, y = inputs
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
