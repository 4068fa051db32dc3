"""Kernel records: what the GPU itself says ran, and for how long (torch's Kineto/CUPTI records).

A second clock beside CUDA events. ``KernelRecorder`` is a context manager around
torch's Kineto profiler with GPU activities only (``cuda_profiler``): on exit (after a full device synchronise)
``records`` holds one ``KernelRecord`` per GPU activity -- kernels, memcpys, memsets --
with its name, stream and start/end on the profiler's clock (nanoseconds). Nothing here
needs ``cupti-python``: torch's own Kineto/CUPTI build collects the records.

Used by the benchmark's witness (``timing.py``: the span of each timed call's kernels,
told apart from the harness's own by ``spin_kernel`` markers) and by anything that needs
to know which kernels a call launched (names, streams, durations). The worker imports
this module before the candidate, so the profiler entry points below are the originals.

Helpers on plain lists (tested without a GPU): ``split_windows`` cuts a record list into
the activity between consecutive marker pairs, ``span_ns`` is first start to last end,
``busy_ns`` the union of the intervals (concurrent streams counted once).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

MARKER = "spin_kernel"  # torch.cuda._sleep's kernel: the harness's markers around a call
_sleep = torch.cuda._sleep  # captured before any candidate code runs
_synchronize = torch.cuda.synchronize

try:  # captured before any candidate code runs
    from torch.autograd.profiler import profile as _profile
except Exception:  # pragma: no cover - a torch without the profiler
    _profile = None  # type: ignore[assignment,misc]


def cuda_profiler() -> Any:
    """torch's Kineto profiler recording GPU activity only (what
    ``torch.profiler.profile(activities=[CUDA])`` builds inside), or None without one.

    Not ``torch.profiler.profile`` itself: its start asks ``hasattr(torch, "_inductor")``,
    which imports inductor and dynamo -- about 3 s in every fresh worker, each check -- and
    dynamo rebinds torch's RNG functions as it loads."""
    if _profile is None:
        return None
    return _profile(use_cpu=False, use_device="cuda", use_kineto=True)


@dataclass(frozen=True)
class KernelRecord:
    """One GPU activity: ``kind`` is ``kernel``, ``memcpy``, ``memset`` or ``other``."""

    name: str
    kind: str
    start_ns: int
    end_ns: int
    stream: int = -1
    device: int = -1
    correlation: int = -1

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def is_marker(self) -> bool:
        return self.kind == "kernel" and MARKER in self.name

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "stream": self.stream,
            "device": self.device,
        }


def _kind(activity: str, name: str) -> str:
    text = f"{activity} {name}".lower()
    if "memcpy" in text:
        return "memcpy"
    if "memset" in text:
        return "memset"
    if activity in ("", "kernel", "concurrent_kernel", "gpu_kernel") or "kernel" in activity:
        return "kernel"
    return "other"


_GPU_ACTIVITIES = ("kernel", "gpu_memcpy", "gpu_memset", "concurrent_kernel", "gpu_kernel")


def _from_kineto(results: Any) -> list[KernelRecord]:
    from torch.autograd import DeviceType

    out: list[KernelRecord] = []
    for event in results.events():
        if event.device_type() != DeviceType.CUDA:
            continue
        activity = ""
        getter = getattr(event, "activity_type", None)
        if getter is not None:
            try:
                activity = str(getter()).lower()
            except Exception:  # torch's binding may refuse some events: counted as work
                activity = ""
        if activity and not any(a in activity for a in _GPU_ACTIVITIES):
            continue  # a GPU-side user annotation, not work
        name = str(event.name())
        start = (
            int(event.start_ns()) if hasattr(event, "start_ns") else int(event.start_us()) * 1000
        )
        end = int(event.end_ns()) if hasattr(event, "end_ns") else start + int(event.duration_ns())
        out.append(
            KernelRecord(
                name=name,
                kind=_kind(activity, name),
                start_ns=start,
                end_ns=end,
                stream=int(getattr(event, "device_resource_id", lambda: -1)()),
                device=int(getattr(event, "device_index", lambda: -1)()),
                correlation=int(getattr(event, "correlation_id", lambda: -1)()),
            )
        )
    return out


def _from_function_events(events: Iterable[Any]) -> list[KernelRecord]:
    """Older torch: ``prof.events()`` (FunctionEvent, microseconds)."""
    from torch.autograd import DeviceType

    out: list[KernelRecord] = []
    for event in events:
        if getattr(event, "device_type", None) != DeviceType.CUDA:
            continue
        name = str(event.name)
        start = int(float(event.time_range.start) * 1000)
        end = int(float(event.time_range.end) * 1000)
        out.append(
            KernelRecord(
                name=name,
                kind=_kind("", name),
                start_ns=start,
                end_ns=end,
                stream=int(getattr(event, "device_resource_id", -1) or -1),
                device=int(getattr(event, "device_index", -1) or -1),
            )
        )
    return out


def available() -> tuple[bool, str]:
    """Whether records can be collected here (a CUDA device and torch's profiler)."""
    if _profile is None:
        return False, "torch has no profiler"
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    return True, ""


class KernelRecorder:
    """``with KernelRecorder() as rec: ...`` -> ``rec.records`` (sorted by start), or
    ``rec.error`` when the profiler could not run (the block still runs)."""

    def __init__(self) -> None:
        self.records: list[KernelRecord] = []
        self.error: str | None = None
        self._prof: Any = None

    def __enter__(self) -> KernelRecorder:
        ok, why = available()
        if not ok:
            self.error = why
            return self
        try:
            _synchronize()
            self._prof = cuda_profiler()
            self._prof.__enter__()
        except Exception as exc:
            self._prof = None
            self.error = f"the profiler did not start: {type(exc).__name__}: {exc}"[:300]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._prof is None:
            return
        try:
            _synchronize()
            self._prof.__exit__(None, None, None)
        except Exception as error:
            self.error = f"the profiler did not stop: {type(error).__name__}: {error}"[:300]
            return
        try:
            results = getattr(self._prof, "kineto_results", None)
            records = _from_kineto(results) if results is not None else []
            if not records:
                records = _from_function_events(self._prof.function_events)
        except Exception as error:
            self.error = f"reading the records failed: {type(error).__name__}: {error}"[:300]
            return
        self.records = sorted(records, key=lambda r: (r.start_ns, r.end_ns))
        if not self.records:
            self.error = "the profiler returned no GPU records"


def mark() -> None:
    """A marker kernel on the current stream (``torch.cuda._sleep`` of no time)."""
    _sleep(1)


# -- pure helpers ----------------------------------------------------------------------------


def split_windows(records: Sequence[KernelRecord]) -> list[list[KernelRecord]] | None:
    """The activity between each pair of markers (opening, closing), in order; markers come
    in pairs around every call. None when they do not pair up (a stray marker kernel)."""
    ordered = sorted(records, key=lambda r: (r.start_ns, r.end_ns))
    markers = [i for i, r in enumerate(ordered) if r.is_marker]
    if len(markers) % 2:
        return None
    windows: list[list[KernelRecord]] = []
    for open_at, close_at in zip(markers[0::2], markers[1::2], strict=True):
        opening, closing = ordered[open_at], ordered[close_at]
        inside = [
            r
            for r in ordered[open_at + 1 : close_at]
            if not r.is_marker and r.start_ns >= opening.end_ns and r.end_ns <= closing.start_ns
        ]
        windows.append([opening, *inside, closing])
    return windows


def span_ns(records: Sequence[KernelRecord]) -> int:
    """First start to last end of the work (markers left out); 0 when there is none."""
    work = [r for r in records if not r.is_marker]
    if not work:
        return 0
    return max(r.end_ns for r in work) - min(r.start_ns for r in work)


def busy_ns(records: Sequence[KernelRecord]) -> int:
    """Time the GPU was busy with the work: the union of the intervals."""
    spans = sorted((r.start_ns, r.end_ns) for r in records if not r.is_marker)
    total = 0
    current: list[int] | None = None
    for start, end in spans:
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def launch_gap_ns(window: Sequence[KernelRecord]) -> int | None:
    """From the end of the opening marker to the first piece of work: how long the GPU
    waited for the call's first launch (None without work)."""
    work = [r for r in window if not r.is_marker]
    if not work or not window or not window[0].is_marker:
        return None
    return max(0, min(r.start_ns for r in work) - window[0].end_ns)


__all__ = [
    "MARKER",
    "KernelRecord",
    "KernelRecorder",
    "available",
    "busy_ns",
    "cuda_profiler",
    "launch_gap_ns",
    "mark",
    "span_ns",
    "split_windows",
]
