"""ck_trace: what a candidate calls to time sections inside its own CUDA C++ or CuTeDSL kernel.

Candidates import it as ``import ck_trace`` (the harness worker registers this module
under that name before it imports a candidate; ``harness`` itself is off limits to
candidates). Tracing is on only in the worker of the ``trace`` rung
(``CTXKERNEL_TRACE=1``); everywhere else every function here is a cheap no-op, the CUDA
header compiles to nothing and the CuTeDSL helper emits nothing, so the checked and timed
kernel is the uninstrumented one.

CUDA C++ (``load_inline``)::

    import ck_trace
    SRC = ck_trace.cuda_header() + r'''
    __global__ void k(float* out, long long* trace) {
        CK_TRACE_OPEN(trace, CK_TRACE_WARP);
        CK_TRACE_BEGIN(0); /* main loop */ CK_TRACE_END(0);
        CK_TRACE_BEGIN(1); /* epilogue  */ CK_TRACE_END(1);
    }'''
    ext = load_inline(name=ck_trace.name("my_ext"), cuda_sources=SRC, ...)
    ...
    buf = ck_trace.buffer(ck_trace.warp_units(grid, threads), ["mainloop", "epilogue"])
    ext.run(..., buf)        # C++: buf.numel() ? buf.data_ptr<int64_t>() : nullptr

CuTeDSL: pass ``cutlass.Int64(buf.data_ptr())`` to the kernel and use
``ck_trace.CuteTrace(ptr)`` inside it (``tr.begin(0)`` / ``tr.end(0)``); ``cute_trace.py``
attaches ``CuteTrace`` here when it is imported (the CuTeDSL backend's ``prepare_trace``
does, before a candidate is), so this module never imports the DSL helper.

The buffer layout is documented in ``include/ck_trace.cuh``; ``buffers.py`` parses it.
This module imports nothing from the harness but its environment registry (``envvars``),
and torch only when a buffer is asked for.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import envvars

ENV = envvars.CTXKERNEL_TRACE.name
MAGIC = 0x436B5472616365  # "CkTrace"
HEADER_WORDS = 8
UNIT_WORDS = 8
EVENT_WORDS = 3
DEFAULT_CAPACITY = 64  # events per unit: 32 section visits
MAX_BYTES = 1 << 30
MARK_SHIFT = 32
MARK_MASK = (1 << 30) - 1  # event tags carry (nonce & MARK_MASK) << MARK_SHIFT
WARP = 0
CTA = 1

_collected: list[dict[str, Any]] = []
_empty: dict[str, Any] = {}


def enabled() -> bool:
    """Whether this process traces (the ``trace`` rung's worker, or a script that set it)."""
    return envvars.CTXKERNEL_TRACE.get()


def include_dir() -> str:
    """The folder holding ``ck_trace.cuh`` (for ``extra_include_paths``)."""
    return str(Path(__file__).resolve().parent / "include")


def cuda_header(enable: bool | None = None) -> str:
    """The header's source, preceded by ``#define CK_TRACE 1`` when tracing: prepend it to
    ``cuda_sources`` (the source then differs between traced and plain builds)."""
    text = (Path(include_dir()) / "ck_trace.cuh").read_text()
    on = enabled() if enable is None else enable
    return ("#define CK_TRACE 1\n" if on else "") + text + "\n"


def cuda_flags(enable: bool | None = None) -> list[str]:
    """``extra_cuda_cflags`` for ``#include "ck_trace.cuh"`` with ``include_dir()``."""
    on = enabled() if enable is None else enable
    return ["-DCK_TRACE=1"] if on else []


def name(base: str) -> str:
    """An extension name that differs when tracing, so the two builds never share a
    directory (``load_inline(name=ck_trace.name("my_ext"), ...)``)."""
    return f"{base}_cktrace" if enabled() else base


def _count(dims: int | Sequence[int]) -> int:
    if isinstance(dims, int):
        return max(0, dims)
    total = 1
    for d in dims:
        total *= max(0, int(d))
    return total


def warp_units(grid: int | Sequence[int], threads_per_cta: int | Sequence[int]) -> int:
    """Units for warp granularity: CTAs x warps per CTA."""
    return _count(grid) * ((_count(threads_per_cta) + 31) // 32)


def cta_units(grid: int | Sequence[int]) -> int:
    """Units for CTA granularity: one per CTA."""
    return _count(grid)


def buffer(
    units: int,
    sections: Sequence[str] = (),
    *,
    capacity: int = DEFAULT_CAPACITY,
    device: Any = None,
    label: str | None = None,
) -> Any:
    """An int64 device buffer for one kernel launch; pass its pointer to the kernel.

    Not tracing: an empty tensor (the plain build never touches it). Tracing: room for
    ``units`` writers of ``capacity`` events each, with a header the kernel reads; the
    harness collects it after the call. ``sections`` names the section ids in order."""
    import torch

    dev = torch.device(device) if device is not None else _default_device(torch)
    if not enabled():
        key = str(dev)
        empty = _empty.get(key)
        if empty is None:
            empty = torch.empty(0, dtype=torch.int64, device=dev)
            _empty[key] = empty
        return empty
    units = int(units)
    capacity = int(capacity)
    if units < 0 or capacity < 1:
        raise ValueError(f"ck_trace.buffer: units={units}, capacity={capacity}")
    words = HEADER_WORDS + units * (UNIT_WORDS + EVENT_WORDS * capacity)
    if words * 8 > MAX_BYTES:
        raise ValueError(
            f"ck_trace.buffer: {units} units x {capacity} events need {words * 8 / 2**20:.0f} MiB "
            f"(limit {MAX_BYTES >> 20} MiB); lower the capacity or trace a smaller grid"
        )
    nonce = int.from_bytes(os.urandom(8), "little") & ((1 << 62) - 1)
    buf = torch.empty(words, dtype=torch.int64, device=dev)
    header = torch.tensor([MAGIC, nonce, units, capacity, 0, 0, 0, 0], dtype=torch.int64)
    if dev.type == "cuda":
        header = header.pin_memory()
        buf[:HEADER_WORDS].copy_(header, non_blocking=True)
    else:
        buf[:HEADER_WORDS].copy_(header)
    _collected.append(
        {
            "buffer": buf,
            "host_header": header,  # alive until the copy above has run
            "sections": [str(s) for s in sections],
            "units": units,
            "capacity": capacity,
            "nonce": nonce,
            "label": label or f"kernel{len(_collected)}",
        }
    )
    return buf


def _default_device(torch: Any) -> Any:
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def take() -> list[dict[str, Any]]:
    """Harness side: the buffers handed out since the last ``take``/``reset``."""
    out = list(_collected)
    _collected.clear()
    return out


def reset() -> None:
    _collected.clear()


def __getattr__(attr: str) -> Any:
    if attr == "CuteTrace":  # cute_trace.py sets it when imported (the CuTeDSL worker does)
        raise AttributeError(
            "ck_trace.CuteTrace is for CuTeDSL candidates: the harness worker provides it "
            "(outside a worker: import harness.tracing.cute_trace first)"
        )
    raise AttributeError(f"module 'ck_trace' has no attribute {attr!r}")
