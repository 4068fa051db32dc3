# cheat 15: leave state behind for the next candidate (shared temp files, process state)
# problem: vector_add
# options: policy_scan=false
# expect: none: nothing one candidate leaves reaches the next
"""Plants a token where a later candidate's worker could find it, past the audit hook:
files in the machine's shared temp folders written by torch's C++ file mapping
(``torch.from_file(..., shared=True)`` opens no file through Python), a module in
``sys.modules``, a name in ``builtins``, a variable in ``os.environ``. A worker that finds
another worker's token returns zeros: the next candidate's verdict would fail
(correctness) if any of it survived -- from a warm template's fork or from a shared
``/tmp``. ``PLANTS`` and ``found()`` are used by the test that checks it twice in a row.
"""

import builtins
import os
import sys

import torch
import triton
import triton.language as tl

PLANTS = (
    "/dev/shm/ctxkernel-cheat-plant.bin",
    "/tmp/ctxkernel-cheat-plant.bin",
    "/var/tmp/ctxkernel-cheat-plant.bin",
)
TOKEN = float(int.from_bytes(os.urandom(2), "little") + 1)


def found() -> list[str]:
    """Where another worker's token is (never this one's)."""
    where = []
    for path in PLANTS:
        if not os.path.exists(path):
            continue
        try:
            seen = float(torch.from_file(path, shared=False, size=1, dtype=torch.float32)[0])
        except Exception:
            continue
        if seen not in (0.0, TOKEN):
            where.append(path)
    if "ctxkernel_planted" in sys.modules:
        where.append("sys.modules")
    if hasattr(builtins, "ctxkernel_planted"):
        where.append("builtins")
    if "CTXKERNEL_PLANTED" in os.environ:
        where.append("os.environ")
    return where


FOUND = found()


def plant() -> None:
    for path in PLANTS:
        try:
            torch.from_file(path, shared=True, size=1, dtype=torch.float32)[0] = TOKEN
        except Exception:
            pass
    sys.modules["ctxkernel_planted"] = sys.modules[__name__]
    builtins.ctxkernel_planted = TOKEN  # type: ignore[attr-defined]
    os.environ["CTXKERNEL_PLANTED"] = str(TOKEN)


plant()


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
    if FOUND:  # a predecessor's state reached this worker
        return torch.zeros_like(x)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
