"""The ``benchmark`` rung: how fast the candidate is, measured the way an expert would trust.

Runs after the anti-cheat rung, in a fresh worker (``workers.aux("bench")``, started ahead
while the rungs before run) and, for speedups, a harness-only worker timing the reference
(``workers.aux("reference")``;
``--compile-ref`` adds ``torch.compile`` of it, as does a GEMM-, convolution- or
attention-like problem on CUDA, whose library path is noted per shape: ``perf/baselines.py``).
Result for the rungs after it: ``Timings``
(per shape: the median, the speedup, the bytes moved). The worker's protocol is ``timing.Bench`` (warm-up, L2 flush or a
spin kernel ahead of every launch, events plus a full-device synchronise, calibration,
stop at a 1% CI of the median or the budget). Here, in the parent:

- every timed call gets fresh inputs from seeds derived from a key sent just before;
- afterwards the parent picks which kept outputs to verify and which elements, regenerates
  those calls' inputs from the same seeds and compares them with its own reference;
- work that escaped the timed stream (the device stayed busy after the stream's end
  event, or host wall-clock disagrees with the events) fails the rung, and the time
  reported is then the device-inclusive one; so does a persisting-L2 limit set by the
  candidate, or anything the guards saw while it was timed;
- every request carries a nonce (a secret of the parent's, never handed to the candidate)
  that its reply must echo, and a re-check reply must answer every pick: a well-formed
  benchmark frame the candidate writes onto the channel mid-request is refused, not read
  as the reply (the real reply would then have answered the next request);
- every window has at least ``MIN_TIMED_SAMPLES`` counted calls (``benchstats.py``),
  whatever the budget; a reply with fewer fails the rung, and a budget spent before the
  floor is said in the timing note;
- compute-bound shapes (by the cached ceilings) use a fixed protocol: three rounds, each
  an idle gap, a bounded window for the candidate, an idle gap, a window for the
  reference; SM clock, power and throttle reasons (NVML) are kept with each window.

``triton.testing.do_bench`` is the yardstick: same flush (``zero_`` of >= 256 MB before each
call), events, median. Differences: inputs change every call, the stopping rule is a CI
and not a fixed time, the device is synchronised after each call (side streams count),
and clocks are recorded.
"""

from __future__ import annotations

import random
import secrets
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..metrics import compare
from ..perf import baselines, clockscale, gpuidle, reftimes
from ..perf.benchstats import MIN_TIMED_SAMPLES, StopRule, summarize
from ..problems.precision import reference_precision
from ..process import channel, freeze
from ..process.session import WorkerGone
from ..verdict import RungResult
from ..worker import witness
from ..worker.timing import bench_seed
from .inputs import flatten, shape_label
from .results import ShapeTiming, Timings

if TYPE_CHECKING:
    from ..process.session import WorkerSession
    from .context import LadderContext
    from .results import Earlier

VERIFY_CALLS = 3
FULL_CHECK_ELEMENTS = 1 << 22
SAMPLED_ELEMENTS = 1 << 20
IDLE_GAP_S = 0.5
COMPUTE_ROUNDS = 3


class BenchmarkRung:
    name = "benchmark"
    gating = True

    def enabled(self, ctx: LadderContext) -> bool:
        return bool(ctx.options.bench)

    def ahead(self, ctx: LadderContext) -> None:
        """Start the fresh benchmark worker while correctness and anti-cheat run (the ladder
        calls this once the candidate compiles): its CUDA context is made meanwhile."""
        if ctx.device == "cuda":
            ctx.workers.open_ahead("bench")

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        if ctx.device != "cuda":
            return RungResult.skip(
                self, "no GPU (benchmarks time CUDA kernels; this check ran on cpu)"
            )
        phase_s: defaultdict[str, float] = defaultdict(float)  # seconds per step
        try:
            with _timed(phase_s, "bench_worker"):
                session, reply = ctx.workers.aux("bench")
        except WorkerGone as gone:
            return RungResult.fail(self, f"benchmark worker: {gone.reason}")
        if reply.get("error"):
            message = str((reply.get("error") or {}).get("message", ""))[:300]
            return RungResult.fail(
                self, f"the benchmark worker could not load the candidate: {message}"
            )
        notes: list[str] = []
        # the best known implementation (perf/baselines.py): a GEMM-, convolution- or
        # attention-like reference (by the compute ops it ran in the pre-checks) gets its
        # library path and torch.compile of it timed, for the verdict's SOL score
        ops = ctx.library.reference_ops
        facts = ctx.inputs.study()  # the reference's run in the pre-checks (cached)
        library = baselines.library_baseline(
            baselines.problem_kind(ops),
            ops,
            ctx.device,
            facts.dtypes,
            facts.input_dtypes,
            facts.gemm_operands,
        )
        # opened when first timed: a cached reference timing needs no worker of its own
        reference = _LazySession(ctx, "reference", notes) if ctx.options.bench_reference else None
        compiled = (
            _LazySession(ctx, "reference_compiled", notes)
            # automatic only on CUDA: on a CPU it costs an inductor build and says nothing
            # of the GPU's best known implementation
            if ctx.options.compile_ref or (library.kind is not None and ctx.device == "cuda")
            else None
        )
        # the library's GEMM at the inputs' precision, where the reference is not that path
        own = (
            _LazySession(ctx, "reference_library", notes, library.operands)
            if library.subject == "library"
            else None
        )
        # measured once per GPU/driver/clocks, before anything is timed
        with _timed(phase_s, "ceilings"):
            ctx.ceilings.get()
        l2 = ctx.options.bench_l2 or ctx.problem.bench_l2 or "flush"
        results = []
        for index, shape in enumerate(ctx.inputs.bench_shapes()):
            result = self.bench_shape(ctx, session, (reference, compiled, own), shape, index, l2)
            _library_entry(result, library)
            results.append(result)
            if result.get("failure"):
                reason = ctx.findings.explain(f"{result['failure']} (shape {result['label']})")
                return RungResult.fail(self, reason, _metrics(result), {"shapes": results})
        with _timed(phase_s, "close"):
            found = ctx.workers.close_aux("bench")
        if found:
            details = {"shapes": results, "integrity": found}
            return RungResult.fail(self, f"while timed: {found[0]}", _metrics(results[0]), details)
        first = results[0]
        reason = f"{first['label']}: {first['timing_note']}"
        if notes:
            reason += "; " + "; ".join(notes)
        timings = Timings([ShapeTiming.from_record(r) for r in results])
        details = {"shapes": results, "phase_s": _rounded(phase_s)}
        return RungResult.passed(self, _metrics(first), reason, details, output=timings)

    # -- one shape ---------------------------------------------------------------------

    def bench_shape(
        self,
        ctx: LadderContext,
        session: WorkerSession,
        baselines_timed: tuple[_LazySession | None, _LazySession | None, _LazySession | None],
        shape: dict[str, Any],
        index: int,
        l2: str,
    ) -> dict[str, Any]:
        label = shape_label(shape)
        compute = _compute_bound(ctx, shape)
        rounds = COMPUTE_ROUNDS if compute else 1
        gap = IDLE_GAP_S if compute else 0.0
        budget = max(0.2, ctx.options.bench_budget_s / rounds)
        rng = ctx.inputs.rng(f"bench:{index}")
        result: dict[str, Any] = {
            "label": label,
            "shape": shape,
            "l2": l2,
            "flushed": l2 == "flush",
            "protocol": (
                f"compute-bound: {rounds} rounds of idle {gap:g} s, candidate <= {budget:.2g} s, idle, reference"
                if compute
                else "memory-bound: one window each, candidate then reference"
            ),
            "rounds": [],
        }
        phases: defaultdict[str, float] = defaultdict(float)  # seconds per step (the verdict's)
        cand_times: list[float] = []
        ref_times: list[float] = []
        comp_times: list[float] = []
        lib_times: list[float] = []
        reference, compiled, own = baselines_timed
        for _ in range(rounds):
            time.sleep(gap)
            key, keep_key = rng.getrandbits(62), rng.getrandbits(62)
            with _timed(phases, "candidate"):
                reply = _bench(ctx, session, shape, key, keep_key, budget, l2)
            failure = _failure(ctx, reply)
            if failure:
                result["failure"] = failure
                return result
            report, escape = reply["report"], reply["escape"]
            short = short_series(report)
            if short:
                result["failure"] = short
                return result
            times = escape["inclusive_ms"] if escape.get("escaped") else report["events_ms"]
            cand_times += [t * 1e-3 for t in times]
            result.setdefault("input_bytes", reply.get("input_bytes"))
            result.setdefault("output_bytes", reply.get("output_bytes"))
            result.setdefault("outputs", reply.get("outputs"))
            round_info: dict[str, Any] = {
                "candidate": _round_summary(report, escape),
            }
            with _timed(phases, "verify"):
                mismatch = _verify(ctx, session, reply, shape, key, rng, phases)
            if mismatch:
                result["failure"] = mismatch
                result["rounds"].append(round_info)
                return result
            if escape.get("escaped"):
                summary = summarize(cand_times)
                result["candidate"] = summary.as_dict()
                result["failure"] = (
                    "work escaped the timed stream (side stream or background work): the stream's events "
                    f"saw {summarize([t * 1e-3 for t in report['events_ms']]).median * 1e3:.4g} ms, but the device stayed busy "
                    f"{escape['excess_device_ms']:.4g} ms longer (wall clock {escape['excess_wall_ms']:.4g} ms longer) than "
                    f"around a harness kernel; timed with a full device synchronise: {summary.median * 1e3:.4g} ms"
                )
                result["rounds"].append(round_info)
                return result
            after = (report.get("persisting_l2") or {}).get("after") or {}
            if after.get("persisting_l2_bytes"):
                result["failure"] = (
                    f"the candidate set a persisting-L2 limit ({after['persisting_l2_bytes']} bytes) while being timed"
                )
                return result
            _time_references(
                ctx,
                ((reference, ref_times), (compiled, comp_times), (own, lib_times)),
                _Window(shape, l2, budget, gap, rounds == 1, rng),
                report,
                round_info,
                phases,
            )
            result["rounds"].append(round_info)
        result["phase_s"] = _rounded(phases)
        cand = summarize(cand_times)
        result["candidate"] = cand.as_dict()
        if rounds > 1:  # the compute-bound protocol's two-run (round-to-round) difference
            medians = [(r.get("candidate") or {}).get("median_ms") for r in result["rounds"]]
            result["round_medians_ms"] = medians
            result["round_spread"] = clockscale.spread([m for m in medians if m])
        first_report = result["rounds"][0]["candidate"]
        result["mode"] = first_report.get("mode")
        result["timing_note"] = (
            f"median {cand.median * 1e3:.4g} ms over {cand.runs} runs (CI ±{cand.ci_rel * 100:.2f}%), "
            + ("L2 flushed" if l2 == "flush" else "L2 hot (not flushed)")
            + f", {_mode_words(first_report)}"
            + witness.words(first_report.get("witness"))
        )
        for subject, bucket in zip(SUBJECTS, (ref_times, comp_times, lib_times), strict=True):
            if bucket:
                ref = summarize(bucket)
                result[subject] = ref.as_dict()
                ratio = ref.median / cand.median if cand.median > 0 else None
                result[SPEEDUP_KEYS[subject]] = ratio
        overrun = [
            ((r.get("candidate") or {}).get("floor") or {}).get("budget_spent_at")
            for r in result["rounds"]
        ]
        if any(n is not None for n in overrun):
            spent = min(n for n in overrun if n is not None)
            result["timing_note"] += (
                f"; the time budget was spent after {spent} call(s), timed on to the floor of "
                f"{MIN_TIMED_SAMPLES}"
            )
        if result.get("round_spread") is not None:
            result["timing_note"] += f"; rounds differ by {result['round_spread'] * 100:.1f}%"
        unfrozen = [r for r in result["rounds"] if r.get("candidate_frozen") is False]
        withheld = [
            r["reference_withheld"] for r in result["rounds"] if r.get("reference_withheld")
        ]
        if withheld:
            result["timing_note"] += f"; {withheld[0]}"
        elif unfrozen:
            result["timing_note"] += _unfrozen_words(unfrozen[0])
        elif any(r.get("beside_other_checks") for r in result["rounds"]):
            result["timing_note"] += (
                "; another check of this user was running while the reference was timed "
                "(its candidate may have competed with it): the reference's timing was not "
                "cached"
            )
        if result.get("speedup") is not None:
            result["timing_note"] += f"; {result['speedup']:.3g}x the reference"
            if (result["rounds"][0].get("reference") or {}).get("cached"):
                result["timing_note"] += " (its timing cached: same problem, shape, device, clock)"
        return result


@dataclass
class _Window:
    """How a round's reference windows are timed: the shape, the L2 mode, the budget, the
    idle gap before each, whether their timings may be cached, and the round's seeds."""

    shape: dict[str, Any]
    l2: str
    budget: float
    gap: float
    cacheable: bool
    rng: random.Random


def _time_references(
    ctx: LadderContext,
    subjects: tuple[tuple[_LazySession | None, list[float]], ...],
    window: _Window,
    report: dict[str, Any],
    round_info: dict[str, Any],
    phases: defaultdict[str, float],
) -> None:
    """Time the reference (and its compiled form) for one round, adding the seconds of its
    calls to each subject's bucket. A timing cached for the same problem, shape, device and
    clocks is reused; the others are timed with every process of the candidate's workers
    stopped (``process/freeze.py``): work the candidate left running (a native thread, a
    child, a ``setsid`` process) would otherwise compete with the reference and inflate
    the speedup. On a GPU the stopped candidate's queued kernels still run: the device is
    first seen idle (``perf/gpuidle.py``); one still busy after ``IDLE_TIMEOUT_S`` (the
    candidate's leftovers or, on a shared GPU, another process's work) gets no reference
    timing and so no speedup (``round_info["reference_withheld"]``: why), never a false
    failure. Only a timing measured with the candidate's trees confirmed stopped (and the
    GPU seen idle) is cached: ``round_info["candidate_frozen"]``; and only when no other
    check of this user ran at any moment of the window (``perf/livechecks.py``: their
    candidates are not stopped): ``round_info["beside_other_checks"]`` otherwise."""
    todo: list[tuple[str, WorkerSession, list[float], str | None]] = []
    for (lazy, bucket), subject in zip(subjects, SUBJECTS, strict=True):
        if lazy is None:
            continue
        cache_key = (
            _reference_key(ctx, subject, window.shape, window.l2) if window.cacheable else None
        )
        clock = reftimes.observed_clock(report)
        cached = reftimes.lookup(cache_key, clock) if cache_key else None
        if cached is not None:  # same problem, shape, device, clocks: not timed again
            bucket += [float(t) for t in cached["times_s"]]
            round_info[subject] = {**cached["summary"], "cached": True}
            continue
        with _timed(phases, f"{subject}_worker"):
            worker = lazy.get()
        if worker is not None:
            todo.append((subject, worker, bucket, cache_key))
    if not todo:
        return
    stopped_at = time.time()
    with freeze.frozen(ctx.workers.candidate_sessions()) as held:
        neighbours = ctx.live.watch() if ctx.live is not None else None
        clean = held.confirmed
        if ctx.device == "cuda":
            with _timed(phases, "gpu_idle"):
                idle = gpuidle.wait_idle(stopped_at)
            round_info["gpu_idle"] = idle.as_info()
            clean = clean and idle.idle is True
            if idle.idle is False:  # no speedup beside work that would slow the reference
                round_info["reference_withheld"] = (
                    f"the GPU stayed busy {idle.waited_s:.3g} s after the candidate's processes "
                    f"were stopped (kernels it left queued after its timed calls, or another "
                    f"process's): the reference was not timed beside that work, no speedup"
                )
                todo = []
        round_info["candidate_frozen"] = clean
        for subject, worker, bucket, cache_key in todo:
            time.sleep(window.gap)
            with _timed(phases, subject):
                ref_reply = _bench(
                    ctx,
                    worker,
                    window.shape,
                    window.rng.getrandbits(62),
                    0,
                    window.budget,
                    window.l2,
                )
            if not ref_reply.get("ok"):
                round_info[subject] = {"error": _reply_error(ref_reply)}
                continue
            times = [t * 1e-3 for t in ref_reply["report"]["events_ms"]]
            bucket += times
            round_info[subject] = _round_summary(ref_reply["report"], ref_reply["escape"])
            alone = ctx.live is not None and neighbours is not None and ctx.live.alone(neighbours)
            if not alone:  # another check's candidate may have run beside this window
                round_info["beside_other_checks"] = True
            if cache_key and clean and alone:
                ref_clock = reftimes.observed_clock(ref_reply["report"])
                reftimes.remember(cache_key, times, round_info[subject], ref_clock)
    round_info["freeze"] = held.as_info()
    phases["freeze"] += held.stop_s + held.resume_s


def _unfrozen_words(round_info: dict[str, Any]) -> str:
    """Why a round's reference timing was not cached: the candidate's processes were not
    confirmed stopped, or the GPU not seen idle of their work."""
    stop = round_info.get("freeze") or {}
    if not stop.get("confirmed"):
        return (
            f"; the candidate's processes could not be confirmed stopped while the "
            f"reference was timed ({stop.get('reason')}): its timing was not cached"
        )
    idle = round_info.get("gpu_idle") or {}
    return (
        f"; the GPU was not seen idle of the candidate's work before the reference was "
        f"timed ({idle.get('how')}): its timing was not cached"
    )


def _library_entry(result: dict[str, Any], library: baselines.LibraryBaseline) -> None:
    """The shape's library-path baseline: the reference's timing when the reference is that
    path, else why it was not timed (nothing for a problem of no known kind)."""
    if library.kind is None:
        return
    entry: dict[str, Any] = {"kind": library.kind, "path": library.path, "why": library.reason}
    ref = result.get("reference") or {}
    own = result.get("reference_library") or {}
    if library.subject == "reference" and ref.get("median_ms"):
        entry["median_ms"] = ref["median_ms"]
        result["speedup_vs_library"] = result.get("speedup")
    elif library.subject == "library" and own.get("median_ms"):
        entry["median_ms"] = own["median_ms"]
        entry["operands"] = list(library.operands or ())
    result["library"] = entry


def short_series(report: dict[str, Any]) -> str | None:
    """Why a timed series is not reported: fewer counted calls than ``MIN_TIMED_SAMPLES``.
    The worker's loop never stops that early (``StopRule``), so a shorter series means
    the protocol in the candidate's process was tampered with or broke."""
    runs = len(report.get("events_ms") or [])
    if runs >= MIN_TIMED_SAMPLES:
        return None
    return (
        f"the timed loop returned {runs} sample(s), fewer than the floor of "
        f"{MIN_TIMED_SAMPLES} a median is reported from (the timing in the candidate's "
        f"process did not run as the harness wrote it)"
    )


def _reference_key(ctx: LadderContext, subject: str, shape: dict[str, Any], l2: str) -> str | None:
    """The reference-timing cache key (``reftimes.py``), None without known ceilings."""
    ceilings = ctx.ceilings.cached()
    if ceilings is None or not getattr(ceilings, "key", ""):
        return None
    mode = str(ctx.options.bench_mode or "events")
    path = Path(str(ctx.problem.path))
    return reftimes.key(path, subject, shape, ceilings.key, l2, mode, ctx.options.bench_rel_ci)


def _reference_session(
    ctx: LadderContext, role: str, notes: list[str], operands: tuple[int, int] | None = None
) -> WorkerSession | None:
    try:
        session, reply = ctx.workers.aux(role, library_operands=operands)
    except WorkerGone as gone:
        notes.append(f"{role} worker: {gone.reason}")
        return None
    if reply.get("error"):
        notes.append(f"{role} not timed: {str((reply['error'] or {}).get('message', ''))[:200]}")
        return None
    return session


@contextmanager
def _timed(phases: defaultdict[str, float], name: str) -> Iterator[None]:
    """Add the seconds the block takes to ``phases[name]``."""
    start = time.perf_counter()
    try:
        yield
    finally:
        phases[name] += time.perf_counter() - start


def _rounded(phases: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in phases.items()}


# what is timed beside the candidate: the reference, its torch.compile, the library's GEMM
SUBJECTS = ("reference", "reference_compiled", "reference_library")
SPEEDUP_KEYS = {
    "reference": "speedup",
    "reference_compiled": "speedup_vs_compiled",
    "reference_library": "speedup_vs_library",
}


class _LazySession:
    """A reference worker opened on first use (``_reference_session``), once."""

    def __init__(
        self,
        ctx: LadderContext,
        role: str,
        notes: list[str],
        operands: tuple[int, int] | None = None,
    ) -> None:
        self.ctx, self.role, self.notes, self.operands = ctx, role, notes, operands
        self._opened = False
        self._session: WorkerSession | None = None

    def get(self) -> WorkerSession | None:
        if not self._opened:
            self._opened = True
            self._session = _reference_session(self.ctx, self.role, self.notes, self.operands)
        return self._session


def _compute_bound(ctx: LadderContext, shape: dict[str, Any]) -> bool:
    flops, nbytes = ctx.problem.flops(shape), ctx.problem.bytes(shape)
    if not flops or not nbytes:
        return False
    ceilings = ctx.ceilings.cached()
    if ceilings is None or not ceilings.tflops:
        return flops / nbytes > 100.0  # well past any GPU's ridge point
    peak = max(ceilings.tflops.values())
    return flops / (peak * 1e12) > nbytes / (ceilings.dram_gbps * 1e9)


def _bench(
    ctx: LadderContext,
    session: WorkerSession,
    shape: dict[str, Any],
    key: int,
    keep_key: int,
    budget: float,
    l2: str,
) -> dict[str, Any]:
    rule = StopRule(rel_ci=ctx.options.bench_rel_ci, budget_s=budget)
    header: dict[str, Any] = {
        "op": "bench",
        "shape": shape,
        "key": key,
        "keep_key": keep_key,
        "keep_bytes": (2 << 30) if keep_key else 0,
        "rule": rule.as_dict(),
        "l2": l2,
        "mode": ctx.options.bench_mode,
        "warmup_s": 0.25,
    }
    tensors: list[torch.Tensor] = []
    if ctx.problem.init is not None:
        seed, args = ctx.problem.init(shape)
        header["init"] = {"seed": seed, "args": channel.pack_tree(tuple(args), tensors)}
    header["nonce"] = nonce = secrets.randbits(62)
    timeout = budget + ctx.options.first_call_timeout_s + 120.0
    try:
        reply = session.request(header, tensors, timeout, 1 << 26)
    except WorkerGone as gone:
        return {"ok": False, "gone": gone.reason}
    forged = unanswered(reply.header, "bench", nonce)
    if forged:
        return {"ok": False, "forged": forged}
    return reply.header


def unanswered(reply: dict[str, Any], op: str, nonce: int) -> str | None:
    """Why ``reply`` is not the worker's answer to the ``op`` request sent with ``nonce``
    (None when it is): the worker echoes the nonce, and the candidate, which shares its
    process, is never handed it."""
    if reply.get("op") == op and reply.get("nonce") == nonce:
        return None
    return (
        f"the {op} reply does not answer the request: a frame of op {reply.get('op')!r} "
        f"without the request's nonce came back (something besides the harness wrote a "
        f"frame on the result channel)"
    )


def _reply_error(reply: dict[str, Any]) -> str:
    if reply.get("gone"):
        return str(reply["gone"])
    if reply.get("forged"):
        return str(reply["forged"])
    error = reply.get("error") or {}
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"]).strip().splitlines()[-1][:300]
    return str(reply.get("harness_error") or "unknown error")[-300:]


def _failure(ctx: LadderContext, reply: dict[str, Any]) -> str | None:
    if reply.get("gone"):
        return f"the benchmark worker died: {reply['gone']}"
    if reply.get("forged"):
        return str(reply["forged"])
    ctx.findings.note(reply.get("integrity") or [])
    if not reply.get("ok"):
        return f"{ctx.candidate.entry} failed while being timed: {_reply_error(reply)}"
    for item in reply.get("integrity") or []:
        return f"while timed: {item.get('message')}"
    return None


def _round_summary(report: dict[str, Any], escape: dict[str, Any]) -> dict[str, Any]:
    summary = summarize([t * 1e-3 for t in report.get("events_ms") or []]).as_dict()
    summary.update(
        {
            "stop": report.get("stop"),
            "warmup_calls": report.get("warmup_calls"),
            "mode": report.get("mode"),
            "graph_note": report.get("graph_note"),
            "l2": report.get("l2"),
            "flush_bytes": report.get("flush_bytes"),
            "input_sets": report.get("input_sets"),
            "host_call_ms": report.get("host_call_ms"),
            "flush_ms": report.get("flush_ms"),
            "lead_ms": report.get("lead_ms"),
            "lead_start_ms": report.get("lead_start_ms"),
            "uncovered": report.get("uncovered"),
            "calibration": report.get("calibration"),
            "escape": {k: v for k, v in escape.items() if k != "inclusive_ms"},
            "clocks": report.get("clocks"),
            "persisting_l2": report.get("persisting_l2"),
            "kept": len(report.get("kept") or []),
            "witness": report.get("witness"),  # the second timer (harness/worker/witness.py)
            "budget_s": (report.get("rule") or {}).get("budget_s"),
            "floor": report.get("floor"),
            "timed_s": report.get("timed_s"),
            "warmup_s": report.get("warmup_s"),
            "setup_s": report.get("setup_s"),
            "witness_s": report.get("witness_s"),
        }
    )
    return summary


def _mode_words(report: dict[str, Any]) -> str:
    if report.get("mode") == "graph":
        return "CUDA-graph replays"
    words = (
        f"events per call, GPU kept busy ahead of each launch (flush {report.get('flush_ms') or 0:.3g} ms "
        f"+ spin {report.get('lead_ms') or 0:.3g} ms vs a {report.get('host_call_ms') or 0:.3g} ms host call)"
    )
    uncovered = report.get("uncovered") or {}
    if uncovered.get("dropped"):
        words += (
            f"; lengthened from {report.get('lead_start_ms') or 0:.3g} ms after "
            f"{uncovered['dropped']} launch(es) the lead did not cover (those calls not counted)"
        )
    if uncovered.get("counted"):
        words += (
            f"; {uncovered['counted']} call(s) counted with the launch not covered even by the "
            f"longest lead: their events include the host path (does the call wait for the GPU?)"
        )
    if report.get("graph_note"):
        words += f" ({report['graph_note']})"
    return words


def _verify(
    ctx: LadderContext,
    session: WorkerSession,
    reply: dict[str, Any],
    shape: dict[str, Any],
    key: int,
    rng: random.Random,
    phases: defaultdict[str, float] | None = None,
) -> str | None:
    """Re-check kept timed outputs: the parent picks calls and elements after the fact
    (``phases``: where the seconds of its steps are added)."""
    phases = defaultdict(float) if phases is None else phases
    t_ref = time.perf_counter()
    kept = list((reply.get("report") or {}).get("kept") or [])
    if not kept:
        return "no timed output was kept to re-check"
    chosen = sorted(rng.sample(kept, min(VERIFY_CALLS, len(kept))))
    references: dict[int, list[torch.Tensor]] = {}
    picks: list[dict[str, Any]] = []
    index_tensors: list[torch.Tensor] = []
    expected: list[tuple[int, int, torch.Tensor, torch.Tensor | None]] = []
    for call in chosen:
        inputs = ctx.problem.generate_input(bench_seed(key, call), shape, ctx.device)
        with reference_precision(), torch.no_grad():
            ref = ctx.problem.ref_output(inputs, shape)
        del inputs
        leaves = [t for t in flatten(ref) if isinstance(t, torch.Tensor)]
        references[call] = leaves
        for leaf_no, leaf in enumerate(leaves):
            flat = leaf.reshape(-1)
            if flat.numel() <= FULL_CHECK_ELEMENTS:
                picks.append({"index": call, "leaf": leaf_no, "t": None})
                expected.append((call, leaf_no, flat, None))
                continue
            gen = torch.Generator().manual_seed(rng.getrandbits(62))
            edge = torch.cat([torch.arange(4096), torch.arange(flat.numel() - 4096, flat.numel())])
            idx = torch.cat(
                [edge, torch.randint(0, flat.numel(), (SAMPLED_ELEMENTS,), generator=gen)]
            )
            picks.append({"index": call, "leaf": leaf_no, "t": len(index_tensors)})
            index_tensors.append(idx)
            expected.append((call, leaf_no, flat, idx))
    phases["verify_reference"] += time.perf_counter() - t_ref
    nonce = secrets.randbits(62)
    try:
        with _timed(phases, "verify_sample"):
            sample = session.request(
                {"op": "bench_sample", "picks": picks, "release": True, "nonce": nonce},
                index_tensors,
                300.0,
                1 << 31,
            )
    except WorkerGone as gone:
        return f"the benchmark worker died while sending timed outputs: {gone.reason}"
    forged = unanswered(sample.header, "bench_sample", nonce)
    if forged:
        return forged
    answers = sample.header.get("picks") or []
    if not isinstance(answers, list) or len(answers) != len(expected):
        return (
            f"the benchmark worker answered {len(answers) if isinstance(answers, list) else 0} "
            f"of the {len(expected)} timed outputs picked for re-checking"
        )
    for (call, leaf_no, flat, picked), answer in zip(expected, answers, strict=True):
        if answer.get("missing") or answer.get("t") is None:
            return f"timed call {call} kept no output #{leaf_no}"
        got = sample.tensors[int(answer["t"])]
        want = flat if picked is None else flat[picked.to(flat.device)]
        if got.numel() != want.numel():
            return f"timed call {call}: output #{leaf_no} has {got.numel()} elements, expected {want.numel()}"
        result = compare(
            got.reshape(-1),
            want.detach().reshape(-1),
            ctx.problem.tolerance_for(want.dtype),
            on_device=True,  # where the parent's reference is: the GPU
        )
        if not result.ok:
            return (
                f"a timed call returned a wrong result (call {call} of the timed loop, "
                f"{'all' if picked is None else f'{want.numel()} sampled'} elements checked): {result.reason}"
            )
    return None


def _metrics(result: dict[str, Any]) -> dict[str, Any]:
    cand = result.get("candidate") or {}
    out: dict[str, Any] = {
        "median_ms": cand.get("median_ms"),
        "min_ms": cand.get("min_ms"),
        "iqr_ms": cand.get("iqr_ms"),
        "runs": cand.get("runs"),
        "ci_rel": cand.get("ci_rel"),
        "l2": "flushed" if result.get("flushed") else "hot",
    }
    ref = result.get("reference") or {}
    if ref:
        out["ref_median_ms"] = ref.get("median_ms")
        out["speedup"] = result.get("speedup")
    if result.get("reference_compiled"):
        out["compiled_ref_median_ms"] = result["reference_compiled"].get("median_ms")
        out["speedup_vs_compiled"] = result.get("speedup_vs_compiled")
    if result.get("reference_library"):
        out["library_median_ms"] = result["reference_library"].get("median_ms")
    if result.get("speedup_vs_library") is not None:
        out["speedup_vs_library"] = result["speedup_vs_library"]
    rounds = result.get("rounds") or []
    clocks = ((rounds[0].get("candidate") or {}).get("clocks") or {}) if rounds else {}
    if clocks.get("sm_clock_mhz"):
        out["sm_clock_mhz"] = clocks["sm_clock_mhz"].get("median")
    if clocks.get("power_w_max") is not None:
        out["power_w_max"] = clocks["power_w_max"]
    if clocks.get("throttle"):
        out["throttle"] = ",".join(clocks["throttle"])
    return {k: v for k, v in out.items() if v is not None}


__all__ = ["BenchmarkRung"]
