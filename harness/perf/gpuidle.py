"""Waiting for the GPU to go idle: no kernel of any process running on it.

A stopped process's kernels already queued on the GPU run on: the benchmark rung stops
every process of the candidate's workers while it times the reference
(``process/freeze.py``), but work the candidate queued before -- a long kernel on a stream
of its own, launched from a thread after its timed calls were synchronised, or by a child
with a CUDA context of its own -- would share the GPU with the reference (contexts
time-slice) and make it look slower. No synchronise of the parent's or the reference's
reaches another process's context, so the wait reads the device as a whole: NVML's
utilisation samples, each the share of one sample period (1/6 s to 1 s by board) in which
any kernel of any context ran. Once the candidate is stopped nothing refills its queues,
and queued work runs back to back: a sample ending after the stop that reads 0 means the
queues had drained. ``wait_idle`` waits for such a sample, up to ``IDLE_TIMEOUT_S``.

Without pynvml (or a driver) it cannot tell, and says so: the caller then keeps the
reference's timing out of the cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

IDLE_TIMEOUT_S = 5.0  # an honest candidate leaves nothing queued: the first sample reads 0
POLL_S = 0.02
MAX_PERIOD_S = 1.0  # the longest sample period of any board (the fallback's wait)


@dataclass
class Idle:
    """Whether the GPU was seen idle (None: no way to tell), after how long, and how."""

    idle: bool | None
    waited_s: float
    how: str
    busy_pct: int | None = None

    def as_info(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"idle": self.idle, "waited_ms": round(self.waited_s * 1e3, 1)}
        doc["how"] = self.how
        if self.busy_pct is not None:
            doc["last_busy_pct"] = self.busy_pct
        return doc


def _nvml() -> tuple[Any, Any, str]:
    """(pynvml, the handle of the GPU torch uses, why not) -- the worker's ``Nvml``."""
    from ..worker.timing import Nvml

    found = Nvml()
    return found.nvml, found.handle, found.error or "no NVML handle"


def _samples_after(nvml: Any, handle: Any, since_us: int) -> list[tuple[int, int]] | None:
    """(timestamp in µs, percent busy) of the utilisation samples taken after
    ``since_us``; None where the driver keeps no samples."""
    try:
        _, samples = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, since_us)
    except Exception:  # NVML's errors vary by driver (not found, not supported): no samples
        return None
    return [(int(s.timeStamp), int(s.sampleValue.uiVal)) for s in samples]


def wait_idle(
    since: float,
    timeout_s: float | None = None,
    nvml: tuple[Any, Any] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Idle:
    """Wait until a utilisation sample taken after ``since`` (``time.time()`` when the
    candidate was stopped) reads 0 (within ``timeout_s``, ``IDLE_TIMEOUT_S`` by default).
    Where the driver keeps no samples: the device's utilisation read at least
    ``MAX_PERIOD_S`` after ``since``. ``nvml``: (pynvml, handle), for tests."""
    timeout_s = IDLE_TIMEOUT_S if timeout_s is None else timeout_s
    start = clock()
    if nvml is None:
        lib, handle, why = _nvml()
        if handle is None:
            return Idle(None, 0.0, f"cannot tell: {why}")
    else:
        lib, handle = nvml
    since_us = int(since * 1e6)
    busy: int | None = None
    how = "NVML utilisation samples"
    while True:
        now = clock()
        samples = _samples_after(lib, handle, since_us)
        if samples is None:
            how = "NVML utilisation"
            if now - since >= MAX_PERIOD_S:
                try:
                    busy = int(lib.nvmlDeviceGetUtilizationRates(handle).gpu)
                except Exception as exc:  # a board that reports no utilisation: cannot tell
                    return Idle(None, now - start, f"cannot tell: {type(exc).__name__}")
                if busy == 0:
                    return Idle(True, now - start, how, busy)
        else:
            for stamp, value in samples:
                busy = value
                if value == 0 and stamp > since_us:
                    return Idle(True, now - start, how, busy)
        if now - start > timeout_s:
            return Idle(False, now - start, how, busy)
        sleep(POLL_S)


__all__ = ["IDLE_TIMEOUT_S", "Idle", "wait_idle"]
