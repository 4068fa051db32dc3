"""The ``trace`` rung: where the time goes inside the kernel (``--trace``).

Not gating, and it never fails a verdict: anything that keeps a trace from being taken
(no GPU, a backend with no kernel, a candidate that marks no sections, an instrumented
build that breaks) is reported as skipped with the reason. It runs the candidate in its
own worker with ``CTXKERNEL_TRACE=1`` -- never in a timing worker: instrumentation
changes timing -- on the first benchmark shape, inputs generated there from a seed.
Triton candidates are traced through Proton's instrumentation mode (scopes in the
``@triton.jit`` function), CUDA C++ and CuTeDSL ones through ``ck_trace`` buffers
(``harness/tracing``).

Reported per section: share of the kernel, mean/p50/p95 cycles per warp or CTA, imbalance
across CTAs and across the warps of a CTA; and the instrumentation overhead: the
instrumented time against the uninstrumented median of the benchmark rung when it ran
on that shape, else of a separate plain worker timed the same way as the instrumented
one. The Perfetto/Chrome JSON of the timeline goes beside the worker logs (so into the
run record) and into ``--dump DIR`` when given; ``ctxkernel runs trace-plot RUN`` draws
it. The agent gets the compact summary (``performance.trace``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..process.session import WorkerGone
from ..verdict import RungResult
from .inputs import shape_label
from .results import Timings, TraceReport

if TYPE_CHECKING:
    from ..tracing.summary import TraceSummary
    from .context import LadderContext
    from .results import Earlier

TRACE_TIMEOUT_S = 600.0
TRACE_SEED_SALT = 4000
TRACE_FILE_SUFFIX = ".trace.json"


class TraceRung:
    name = "trace"
    gating = False

    def enabled(self, ctx: LadderContext) -> bool:
        return bool(getattr(ctx.options, "trace", False))

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        skip = RungResult.skip
        if ctx.device != "cuda":
            return skip(
                self,
                f"no GPU: intra-kernel traces read GPU clocks (this check ran on {ctx.device})",
            )
        backend = ctx.backend
        if not backend.compiles_kernels:
            return skip(self, f"backend {backend.name} has no kernel of its own to instrument")
        if backend.trace_recorder is None:
            return skip(self, f"backend {backend.name} has no intra-kernel trace recorder")
        shape = ctx.inputs.bench_shapes()[0]
        request = {
            "op": "trace",
            "shape": shape,
            "seed": ctx.inputs.seed(TRACE_SEED_SALT),
            "warmup": 2,
            "instrument": True,
            "time_calls": 20,
            "budget_s": 5.0,
        }
        reply, tensors, found = _ask(ctx, "trace", {"CTXKERNEL_TRACE": "1"}, request)
        details: dict[str, Any] = {"shape": shape_label(shape), "integrity": found}
        if reply.get("gone"):
            return skip(self, f"the instrumented worker {reply['gone']}", details)
        if not reply.get("ok"):
            message = str((reply.get("error") or {}).get("message", "")).strip()
            details["notes"] = reply.get("notes") or []
            if reply.get("harness_error"):
                details["harness_error"] = reply["harness_error"]
            return skip(self, f"no trace: {message[:600] or 'the trace request failed'}", details)
        from ..tracing.model import Trace
        from ..tracing.summary import Overhead, summarize

        trace = Trace.from_wire(reply["trace"], tensors)
        trace.notes.extend(str(n) for n in reply.get("notes") or [])
        summary = summarize(trace)
        timing = reply.get("timing") or {}
        baseline, source = (
            _baseline(ctx, earlier.get(Timings), shape, request)
            if timing.get("median_ms")
            else (None, "")
        )
        if timing.get("median_ms") and baseline:
            summary.overhead = Overhead(
                float(timing["median_ms"]), baseline, source, str(timing.get("method", ""))
            )
        files = _write_files(ctx, trace, summary, shape)
        doc = summary.to_json()
        report = TraceReport(
            {
                "shape": shape_label(shape),
                "sentence": summary.sentence(),
                "lines": summary.lines(),
                "dominant": doc.get("dominant"),
                "shares": {s.name: s.share for s in summary.ranked()},
                "overhead_pct": summary.overhead.pct if summary.overhead else None,
                "files": sorted({Path(f).name for f in files}),
            }
        )
        dominant = summary.dominant
        metrics: dict[str, Any] = {
            "sections": len(summary.ranked()),
            "units": summary.units,
            "dominant_pct": dominant.share * 100 if dominant else None,
            "overhead_pct": summary.overhead.pct if summary.overhead else None,
        }
        details.update(
            {"summary": doc, "timing": timing, "files": files, "clock": reply.get("clock")}
        )
        reason = f"{shape_label(shape)}: {summary.sentence()}"
        return RungResult.passed(self, metrics, reason, details, output=report)


def _ask(
    ctx: LadderContext, role: str, env: dict[str, str], request: dict[str, Any]
) -> tuple[dict[str, Any], list[Any], list[str]]:
    """Open the ``role`` worker, send one trace request, close it. A dead worker comes
    back as ``{"gone": reason}``; a failed load as the load's error."""
    workers = ctx.workers
    try:
        session, loaded = workers.aux(role, env=env)
    except WorkerGone as gone:
        workers.close_aux(role)
        return {"gone": gone.reason}, [], []
    if loaded.get("error"):
        found = workers.close_aux(role)
        message = str((loaded.get("error") or {}).get("message", ""))
        return (
            {"ok": False, "error": {"message": f"loading the candidate failed: {message}"}},
            [],
            found,
        )
    try:
        reply = session.request(request, [], TRACE_TIMEOUT_S, 1 << 30)
    except WorkerGone as gone:
        return {"gone": gone.reason}, [], workers.close_aux(role)
    found = workers.close_aux(role)
    return dict(reply.header), list(reply.tensors), found


def _baseline(
    ctx: LadderContext, timings: Timings | None, shape: dict[str, Any], request: dict[str, Any]
) -> tuple[float | None, str]:
    timed = timings.for_shape(shape) if timings else None
    if timed is not None and timed.median_ms:
        return timed.median_ms, "benchmark rung median"
    plain = dict(request, instrument=False)
    reply, _, _ = _ask(ctx, "trace_base", {}, plain)
    median = (reply.get("timing") or {}).get("median_ms") if reply.get("ok") else None
    if median:
        return float(median), "plain worker, same protocol"
    return None, ""


def _write_files(
    ctx: LadderContext, trace: Any, summary: TraceSummary, shape: dict[str, Any]
) -> list[str]:
    """The Perfetto JSON beside the worker logs (copied into the run record) and in
    ``--dump DIR``; returns the paths written."""
    from ..tracing.perfetto import to_chrome_trace

    doc = to_chrome_trace(trace, summary.to_json())
    doc["otherData"]["ctxkernel"].update(
        {
            "problem": ctx.problem.name,
            "candidate": ctx.candidate.path.name,
            "shape": shape_label(shape),
        }
    )
    name = "trace-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in shape_label(shape))
    name = name[:80] + TRACE_FILE_SUFFIX
    text = json.dumps(doc, separators=(",", ":")) + "\n"
    places = []
    log = ctx.workers.logs.get("stderr")
    if log:
        places.append(Path(log).parent)
    if ctx.options.dump_dir:
        places.append(Path(ctx.options.dump_dir))
    written: list[str] = []
    for folder in places:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
            written.append(str(folder / name))
        except OSError:
            continue
    return written
