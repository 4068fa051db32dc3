"""The worker's side of the ``trace`` request: run the candidate instrumented and hand back a ``Trace``.

The ``trace`` rung opens its own worker with ``CTXKERNEL_TRACE=1`` (never one that
times the candidate for the benchmark: instrumentation changes timing). Request:
``{"op": "trace", "shape", "seed", "warmup", "instrument", "time_calls", "budget_s"}``;
inputs are generated here from the seed. Candidates whose backend's ``trace_recorder`` is
``proton`` (Triton) are traced with Proton
(uninstrumented warm-up first, so autotuning is done; one throw-away instrumented session,
so the instrumented compile and cold caches stay out; then the traced call); the others
through the ``ck_trace`` buffers their kernels filled in one call after warm-up.

Timing (for the instrumentation overhead): do_bench-like -- an L2-sized flush ahead of
every call keeps the GPU busy through the launch, CUDA events around the call, median of
``time_calls`` calls. With ``instrument: false`` the same protocol times the plain
candidate (the rung's baseline when no benchmark ran). Proton synchronises and copies its
buffer after every launch, so its instrumented time is the kernel's globaltimer span from
the trace (first CTA start to last CTA end, finalisation included) instead.

Reply: ``trace`` (the ``Trace`` header; two int64 tensors follow), ``timing``,
``clock`` (NVML SM clock, MHz), ``notes``, ``integrity``.
"""

from __future__ import annotations

import statistics
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from ..worker.state import WorkerState

FLUSH_BYTES = 256 << 20
DEFAULT_TIME_CALLS = 20


def handle_trace(
    worker: WorkerState, req: dict[str, Any], tensors: list[torch.Tensor]
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    try:
        return _handle(worker, req)
    except Exception as exc:
        return {
            "ok": False,
            "op": "trace",
            "error": {"message": f"{type(exc).__name__}: {exc}"[:2000]},
            "harness_error": traceback.format_exc()[-3000:],
            "integrity": worker.integrity(),
        }, []


def _fail(worker: WorkerState, message: str, **extra: Any) -> tuple[dict[str, Any], list[Any]]:
    return {
        "ok": False,
        "op": "trace",
        "error": {"message": message},
        "integrity": worker.integrity(),
        **extra,
    }, []


def _handle(worker: WorkerState, req: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    import torch

    from ..backends import get_backend
    from ..worker.benchworker import _guarded_call

    if worker.device != "cuda":
        return _fail(worker, "no GPU: intra-kernel traces read GPU clocks")
    if worker.problem is None or worker.entry is None:
        return _fail(worker, "the trace worker has no problem or no candidate loaded")
    shape = dict(req.get("shape") or {})
    inputs = worker.problem.generate_input(int(req.get("seed", 1)), shape, "cuda")
    call = _guarded_call(worker, worker.get_entry(None, []))
    warmup = max(1, int(req.get("warmup", 2)))
    time_calls = max(1, int(req.get("time_calls", DEFAULT_TIME_CALLS)))
    budget_s = float(req.get("budget_s", 5.0))
    notes: list[str] = []
    if not req.get("instrument", True):
        for _ in range(warmup):
            call(inputs)
        torch.cuda.synchronize()
        times = time_calls_ms(call, inputs, time_calls, budget_s)
        return {
            "ok": True,
            "op": "trace",
            "timing": _timing(times, "events, flush ahead"),
            "integrity": worker.integrity(),
        }, []
    findings: list[dict[str, str]] = []
    if get_backend(worker.backend_name).trace_recorder == "proton":
        result = _trace_proton(worker, call, inputs, warmup, notes, findings)
    else:
        result = trace_buffers(call, inputs, warmup)
    if isinstance(result, str):
        return _fail(worker, result, notes=notes)
    trace, timing, clock = result
    if trace.backend == "ck_trace":
        from . import ck_trace

        times = time_calls_ms(call, inputs, time_calls, budget_s, between=ck_trace.reset)
        ck_trace.reset()
        timing = _timing(times, "events, flush ahead, instrumented build")
    header, out = trace.to_wire()
    return {
        "ok": True,
        "op": "trace",
        "trace": header,
        "timing": timing,
        "clock": {"sm_mhz": clock},
        "notes": notes,
        "integrity": findings + worker.integrity(),
    }, out


# -- Triton: Proton ----------------------------------------------------------------------


def _quiet_harness_changes(worker: WorkerState) -> None:
    """Proton's hooks are the harness's doing, not the candidate's: names they touched
    are not reported as candidate patches."""
    snapshot = getattr(worker, "snapshot", None)
    if snapshot is not None:
        worker.reported_patches.update(snapshot.changed())


def _trace_proton(
    worker: WorkerState,
    call: Any,
    inputs: Any,
    warmup: int,
    notes: list[str],
    findings: list[dict[str, str]],
) -> tuple[Any, dict[str, Any], float | None] | str:
    def before() -> None:
        findings.extend(worker.integrity())

    def started() -> None:
        _quiet_harness_changes(worker)

    def after() -> None:
        findings.extend(worker.integrity())

    return trace_proton(
        call, inputs, Path(worker.workdir) / ".ck-trace", warmup, notes,
        hooks=(before, started, after, started),
    )  # fmt: skip


def trace_proton(
    call: Any,
    inputs: Any,
    folder: Path,
    warmup: int,
    notes: list[str],
    hooks: tuple[Any, Any, Any, Any] | None = None,
    keep: list[Path] | None = None,
) -> tuple[Any, dict[str, Any], float | None] | str:
    """Warm up uninstrumented, one throw-away instrumented session, then the traced call.
    ``hooks``: callables run before a session starts, after it started, after the call and
    after it finished (the worker's integrity bookkeeping). ``keep`` receives the Chrome
    trace file Proton wrote. Returns the trace, its timing and the SM clock, or why not."""
    import torch

    from .proton import ProtonSession, load_chrome_events, parse_chrome_trace

    why = ProtonSession.unavailable_reason()
    if why:
        return why
    noop = lambda: None  # noqa: E731
    before, started, after, finished = hooks or (noop, noop, noop, noop)
    for _ in range(warmup):  # plain build: compile, autotune, warm the allocator
        call(inputs)
    torch.cuda.synchronize()
    clock: float | None = None
    last_error = ""
    for buffer_type in ("shared", "global"):
        path = None
        try:
            for tag in ("warm", "trace"):
                before()
                session = ProtonSession(folder / f"proton-{buffer_type}-{tag}", buffer_type)
                session.start()
                started()
                try:
                    call(inputs)
                    torch.cuda.synchronize()
                    clock = sm_clock_mhz()
                finally:
                    after()
                    path = session.finish()
                    finished()
        except Exception as exc:
            text = str(exc).strip()
            last_error = f"{type(exc).__name__}: {text.splitlines()[0][:300] if text else ''}"
            notes.append(f"Proton with a {buffer_type} buffer failed: {last_error}")
            continue
        if path is None:
            return "Proton wrote no trace file (did the kernel run under the session?)"
        if keep is not None:
            keep.append(path)
        events = load_chrome_events(path)
        trace = parse_chrome_trace(events, *_clock(clock))
        if trace.is_empty():
            return (
                "no Proton scope was recorded: mark sections inside the @triton.jit function "
                "with triton.profiler.language (pl.enter_scope('mainloop') ... "
                "pl.exit_scope('mainloop'))"
            )
        if buffer_type != "shared":
            trace.notes.append("Proton used a global-memory buffer (shared memory was full)")
        spans = launch_spans_ns(events)
        timing: dict[str, Any] = {"method": "globaltimer span of the traced launch (Proton)"}
        if spans:
            timing["median_ms"] = statistics.median(spans) / 1e6
            timing["runs"] = len(spans)
        return trace, timing, clock
    return f"Proton instrumentation failed: {last_error}"


def launch_spans_ns(events: list[dict[str, Any]]) -> list[float]:
    """Per launch in a Proton Chrome trace: last CTA's ``Post Final Time`` minus the first
    CTA's ``Init Time`` (globaltimer, ns)."""
    from .proton import INIT_KEY, PID_PATTERN

    per_cta: dict[tuple[str, int], set[int]] = defaultdict(set)
    post: dict[tuple[str, int, int], int] = {}
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        match = PID_PATTERN.match(str(e.get("pid", "")))
        args = e.get("args") or {}
        if match is None or INIT_KEY not in args:
            continue
        init = int(args[INIT_KEY])
        key = (match["kernel"], int(match["cta"]))
        per_cta[key].add(init)
        end = int(args.get("Post Final Time (ns)", init) or init)
        post[(key[0], key[1], init)] = max(post.get((key[0], key[1], init), 0), end)
    launches: dict[tuple[str, int], list[int]] = defaultdict(list)  # (kernel, rank) -> inits
    ends: dict[tuple[str, int], int] = defaultdict(int)
    for (kernel, cta), inits in per_cta.items():
        for rank, init in enumerate(sorted(inits)):
            launches[(kernel, rank)].append(init)
            ends[(kernel, rank)] = max(ends[(kernel, rank)], post[(kernel, cta, init)])
    return [float(ends[k] - min(v)) for k, v in launches.items() if ends[k] > min(v)]


# -- CUDA C++ / CuTeDSL: ck_trace buffers ----------------------------------------------------


def trace_buffers(
    call: Any, inputs: Any, warmup: int
) -> tuple[Any, dict[str, Any], float | None] | str:
    """Warm up, then one call whose ``ck_trace`` buffers are parsed. Returns the trace,
    an empty timing (the caller times) and the SM clock, or why there is no trace."""
    from . import ck_trace
    from .buffers import parse_buffers

    if not ck_trace.enabled():
        return "the trace worker was started without CTXKERNEL_TRACE=1"
    for _ in range(warmup):
        call(inputs)
    _sync()
    ck_trace.reset()
    call(inputs)
    _sync()
    clock = sm_clock_mhz()
    entries = ck_trace.take()
    if not entries:
        return (
            "the candidate asked for no ck_trace buffer: call ck_trace.buffer(units, sections) "
            "and pass it to a kernel that uses CK_TRACE_OPEN/BEGIN/END (CUDA C++) or "
            "ck_trace.CuteTrace (CuTeDSL)"
        )
    trace = parse_buffers(entries, *_clock(clock))
    if trace.is_empty():
        return "; ".join(trace.notes) or "the kernel recorded no section"
    return trace, {}, clock


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# -- timing ------------------------------------------------------------------------------


def time_calls_ms(
    call: Any, inputs: Any, n: int, budget_s: float, between: Any = None
) -> list[float]:
    """do_bench-like: flush (a 256 MB write) ahead of each call, CUDA events around it,
    the whole device synchronised after it."""
    import torch

    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    start_evt = torch.cuda.Event(enable_timing=True)
    end_evt = torch.cuda.Event(enable_timing=True)
    times: list[float] = []
    deadline = time.monotonic() + budget_s
    for _ in range(n):
        flush.zero_()
        start_evt.record()
        call(inputs)
        end_evt.record()
        torch.cuda.synchronize()
        times.append(float(start_evt.elapsed_time(end_evt)))
        if between is not None:
            between()
        if time.monotonic() > deadline and len(times) >= 3:
            break
    return times


def _timing(times: list[float], method: str) -> dict[str, Any]:
    if not times:
        return {"method": method, "runs": 0}
    return {
        "method": method,
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "runs": len(times),
    }


def _clock(mhz: float | None) -> tuple[float | None, str]:
    return (1000.0 / mhz, "NVML SM clock after the traced call") if mhz else (None, "")


def sm_clock_mhz() -> float | None:
    """The current SM clock of the current CUDA device from NVML (matched by PCI bus id,
    else NVML's device 0), or ``None``."""
    try:
        import pynvml
        import torch

        pynvml.nvmlInit()
        handle = None
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        if hasattr(props, "pci_bus_id"):
            bus = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
            try:
                handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus.encode())
            except Exception:  # NVML's errors vary by driver: its device 0 then
                handle = None
        if handle is None:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        return float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except Exception:  # pynvml missing, no driver, or no clock: unknown
        return None
