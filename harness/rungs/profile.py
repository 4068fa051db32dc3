"""The ``profile`` rung: Nsight Compute on the candidate's kernels (``--profile``).

Not gating. ``ncu --clock-control none`` wraps a *separate* one-shot worker (never a timing
one: a profiled process is slowed by replay and instrumentation) that loads the
candidate, warms it up outside the NVTX range ``ctxkernel_candidate`` and calls it once
inside it, so only the candidate's kernels of that call are profiled. Inputs are the
first benchmark shape's, generated in that worker from a seed. The CSV (``--page raw``)
becomes a short summary for the agent (``ncu.summarize``): DRAM and SM throughput
percent, achieved occupancy, top stall reasons, L2 hit rate, and what the hot kernel
executed (``isa.py``: tensor family, TMA, FP32 vs half precision); its duration is
compared with the benchmark's median when both exist. An ncu that does not know one of
``ncu.EXECUTED_METRICS`` is run again without them, and the reason says so. Also run for
``--expect-isa`` (the ``isa`` rung decides on what it found). Skipped, with the reason,
when there is no GPU, no ncu, no counter access, or a runner that cannot wrap a worker.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..perf import isa, ncu
from ..process.workerfiles import read_worker_file
from ..verdict import RungResult
from .inputs import shape_label
from .results import ProfileReport, Timings

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier

PROFILE_TIMEOUT_S = 420.0
PROFILE_SEED_SALT = 3000


class ProfileRung:
    name = "profile"
    gating = False

    def enabled(self, ctx: LadderContext) -> bool:
        return bool(ctx.options.profile or ctx.options.expect_isa)

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        if ctx.device != "cuda":
            return RungResult.skip(self, "no GPU (ncu profiles CUDA kernels)")
        oneshot = ctx.workers.oneshot
        if oneshot is None:
            return RungResult.skip(self, "this runner cannot wrap a worker in a profiler")
        binary = ncu.find_ncu()
        if binary is None:
            return RungResult.skip(self, "ncu (Nsight Compute) not found on PATH")
        shape = ctx.inputs.bench_shapes()[0]
        tmp = Path(tempfile.mkdtemp(prefix="ctxkernel-ncu-"))
        request = {
            "load": ctx.workers.load_header(with_problem=True),
            "shape": shape,
            "seed": ctx.inputs.seed(PROFILE_SEED_SALT),
            "warmup": 2,
            "calls": 1,
            "nvtx": ncu.NVTX_RANGE,
        }
        notes: list[str] = []
        try:
            outcome, text = _profiled(oneshot, request, binary, ncu.EXECUTED_METRICS, tmp)
            unknown = ncu.unknown_metric(text + "\n" + _read(outcome.get("stderr")))
            if unknown and not outcome.get("timed_out"):  # this ncu lacks a documented name
                notes.append(f"this ncu does not know {unknown}: profiled without per-pipe counts")
                outcome, text = _profiled(oneshot, request, binary, (), tmp)
            log = tmp / "ncu.csv"
            if text:
                log.write_text(text)
            kept = None
            if ctx.options.dump_dir:
                dest = Path(ctx.options.dump_dir)
                dest.mkdir(parents=True, exist_ok=True)
                kept = dest / f"ncu-{_safe(shape_label(shape))}.csv"
                if log.is_file():
                    shutil.copyfile(log, kept)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        stderr = _read(outcome.get("stderr"))
        details: dict[str, Any] = {
            "returncode": outcome.get("returncode"),
            "csv": str(kept) if kept else None,
        }
        if outcome.get("timed_out"):
            return RungResult.skip(self, f"ncu ran past {PROFILE_TIMEOUT_S:g} s", details)
        profiles = ncu.parse_raw_csv(text)
        if not profiles:
            why = ncu.unavailable_reason(text + "\n" + stderr)
            worker = outcome.get("result") or {}
            if not why and worker and not worker.get("ok"):
                why = f"the profiled worker failed: {str((worker.get('error') or {}).get('message', ''))[-300:]}"
            details["log_tail"] = (text + stderr)[-2000:]
            return RungResult.skip(self, why or "ncu produced no rows", details)
        summary = ncu.summarize(profiles)
        hottest = isa.hot(profiles)
        executed = isa.evidence(hottest) if hottest is not None else None
        if executed is not None:
            summary["executed"] = executed.as_dict()
        metrics: dict[str, Any] = {
            k: summary[k]
            for k in (
                "duration_ms",
                "dram_gbps",
                "dram_pct",
                "sm_pct",
                "achieved_occupancy_pct",
                "l2_hit_pct",
                "kernels",
            )
            if k in summary
        }
        timings = earlier.get(Timings)
        timed = timings.for_shape(shape) if timings else None
        if timed is not None and timed.median_ms and summary.get("duration_ms"):
            metrics["bench_vs_ncu"] = timed.median_ms / summary["duration_ms"]
        details["summary"] = summary
        report = ProfileReport(
            {
                "shape": shape_label(shape),
                **{k: v for k, v in summary.items() if k != "per_kernel"},
            },
            executed,
        )
        reason = f"{shape_label(shape)}: {ncu.sentence(summary)}"
        if executed is not None:
            reason += f"; hot kernel executed: {executed.words()}"
        if notes:
            reason += "; " + "; ".join(notes)
        return RungResult.passed(self, metrics, reason, details, output=report)


def _profiled(
    oneshot: Any, request: dict[str, Any], binary: str, metrics: tuple[str, ...], tmp: Path
) -> tuple[dict[str, Any], str]:
    """One ncu run of the profiled worker: (its outcome, the CSV it wrote or '')."""
    # ncu runs inside the walls: its log goes to the tool's own folder, which the worker it
    # profiles cannot write, and is read as any file from inside (regular, bounded size)
    cmd = ncu.command(binary, "{tooldir}/.ncu.csv", metrics=metrics)
    outcome: dict[str, Any] = oneshot(request, cmd, PROFILE_TIMEOUT_S, tag="profile")
    written = Path(str(outcome.get("tooldir") or tmp)) / ".ncu.csv"
    if not written.is_file() and Path(f"{written}.log").is_file():
        written = Path(f"{written}.log")
    return outcome, _read_worker_file(written)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:60]


def _read(path: Any) -> str:
    try:
        return Path(path).read_text(errors="replace")[-20000:] if path else ""
    except OSError:
        return ""


def _read_worker_file(path: Path, limit: int = 64 << 20) -> str:
    """A file the profiled worker's side wrote: '' unless it is a regular file (no link)
    of at most ``limit`` bytes."""
    data = read_worker_file(path, limit)  # opened without following or blocking
    return data.decode(errors="replace") if data is not None else ""
