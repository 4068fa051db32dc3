"""The ladder: run rungs in order, stop at the first failed gating rung, build the Verdict.

``Rung`` is the protocol every rung implements: ``name``, ``gating``, ``run(ctx, earlier)
-> RungResult``. ``earlier`` holds the typed results of the rungs before (``results.py``):
a rung's ``RungResult.output`` is added to it. Rungs after a failed gate are listed as
not run. A rung that crashes is a harness bug and is reported as that rung failing with
"harness error", never as a pass; so is closing the workers after the rungs (a failed
``close`` result). Once the compile rung passes, each enabled rung's optional
``ahead(ctx)`` starts what it will need (the benchmark's worker) while the rungs before it
run. A rung may define ``enabled(ctx)``: the performance rungs (benchmark, roofline, dumps,
profile, isa, sanitize, trace) run only when asked for (``--bench``, ``--dump``/``--target``,
``--profile``, ``--expect-isa``, ``--sanitize``, ``--trace``). A rung that reports ``ok=None`` was
skipped for a reason (no GPU, no ncu) and does not fail the verdict; only ``ok=False``
does. The verdict's ``performance`` is what the typed results report, and its ``summary``
(time, percent of roofline, speedup, bound) comes from ``Timings`` and ``Roofline``.
"""

from __future__ import annotations

import math
import platform
import sys
import time
import traceback
from collections.abc import Callable
from typing import Protocol

from ..errors import UsageError
from ..perf import baselines
from ..problems.precision import REFERENCE_PRECISION_FLAGS
from ..verdict import PerformanceSummary, RungResult, Verdict
from .anticheat import AntiCheatRung
from .benchmark import BenchmarkRung
from .compile import CompileRung
from .context import LadderContext
from .correctness import CorrectnessRung
from .dump import DumpRung
from .isa import IsaRung
from .precheck import PreCheckRung
from .profile import ProfileRung
from .results import Earlier, Roofline, Timings
from .roofline import RooflineRung
from .run import RunRung
from .sanitize import SanitizeRung
from .trace import TraceRung


class Rung(Protocol):
    name: str
    gating: bool

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult: ...


class _Closing:
    """The ladder's goodbye to its workers, named in the verdict when it fails."""

    name = "close"
    gating = True


_CLOSING = _Closing()


class Ladder:
    def __init__(self, rungs: list[Rung]) -> None:
        self.rungs = rungs

    @classmethod
    def default(cls) -> Ladder:
        return cls(
            [
                PreCheckRung(),
                CompileRung(),
                RunRung(),
                CorrectnessRung(),
                AntiCheatRung(),
                BenchmarkRung(),
                RooflineRung(),
                DumpRung(),
                ProfileRung(),
                IsaRung(),
                SanitizeRung(),
                TraceRung(),
            ]
        )

    def run(
        self, ctx: LadderContext, on_rung: Callable[[RungResult, float], None] | None = None
    ) -> Verdict:
        """Every enabled rung in order until a gating one fails; ``on_rung`` hears each
        result and its seconds as it ends (``check --progress``)."""
        started = time.monotonic()
        results: list[RungResult] = []
        earlier = Earlier()
        stopped = False
        rung_s: dict[str, float] = {}  # where a verdict's seconds go, rung by rung
        for rung in self.rungs:
            enabled = getattr(rung, "enabled", None)
            if enabled is not None and not enabled(ctx):
                continue
            if stopped:
                results.append(RungResult.not_run(rung))
                continue
            rung_started = time.monotonic()
            try:
                result = rung.run(ctx, earlier)
            except UsageError:
                raise
            except Exception as exc:
                result = RungResult.fail(
                    rung,
                    f"harness error in {rung.name}: {type(exc).__name__}: {exc}",
                    details={"traceback": traceback.format_exc()[-3000:]},
                )
            rung_s[rung.name] = round(time.monotonic() - rung_started, 3)
            results.append(result)
            if on_rung is not None:
                on_rung(result, rung_s[rung.name])
            # handed over, not kept twice: the verdict's results hold no rung's typed result
            # (a result a reader takes, as correctness takes the first call, is then freed)
            earlier.add(result.output)
            result.output = None
            if result.ok is False and rung.gating:
                stopped = True
            elif rung.name == "compile" and result.ok:
                self._start_ahead(ctx)
        closing = time.monotonic()
        try:
            ctx.close()
        except UsageError:
            raise
        except Exception as exc:  # a harness bug while closing: the verdict fails, named
            results.append(
                RungResult.fail(
                    _CLOSING,
                    f"harness error closing the workers: {type(exc).__name__}: {exc}",
                    details={"traceback": traceback.format_exc()[-3000:]},
                )
            )
        rung_s["(close)"] = round(time.monotonic() - closing, 3)
        return self._verdict(ctx, results, earlier, time.monotonic() - started, rung_s)

    def _start_ahead(self, ctx: LadderContext) -> None:
        """Once the candidate compiles: what the enabled rungs after it will need, started
        now (``ahead(ctx)``: the benchmark's fresh worker), so that it is ready when they
        run. Never decides anything: a failure here is the rung's to report later."""
        for rung in self.rungs:
            ahead = getattr(rung, "ahead", None)
            enabled = getattr(rung, "enabled", None)
            if ahead is None or (enabled is not None and not enabled(ctx)):
                continue
            try:
                ahead(ctx)
            except Exception:  # never decides: the rung reports the failure when it runs
                pass

    def _verdict(
        self,
        ctx: LadderContext,
        results: list[RungResult],
        earlier: Earlier,
        wall: float,
        rung_s: dict[str, float],
    ) -> Verdict:
        import torch

        env = dict(ctx.workers.environment)
        env.setdefault("device", ctx.device)
        env["parent"] = {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "host": platform.node(),
        }
        env["reference_precision"] = REFERENCE_PRECISION_FLAGS
        env["rung_s"] = rung_s
        if ctx.device == "cuda" and torch.cuda.is_available():
            env.setdefault("gpu", torch.cuda.get_device_name(0))
        interpreter = bool(env.get("triton_interpreter")) or ctx.backend.interpreted_on(ctx.device)
        ok = bool(results) and not any(r.ok is False for r in results)
        return Verdict(
            ok=ok,
            problem=ctx.problem.name,
            problem_format=ctx.problem.format,
            candidate=str(ctx.candidate.path),
            backend=ctx.candidate.backend,
            device=ctx.device,
            interpreter=interpreter,
            rungs=results,
            environment=env,
            integrity=list(ctx.findings.messages),
            seeds=ctx.inputs.seeds(),
            options={
                "trials": ctx.options.trials,
                "burst": ctx.options.burst,
                "timeout_s": ctx.options.timeout_s,
                "policy_scan": ctx.options.policy_scan,
                "forbidden": ctx.problem.forbidden,
                "bench": ctx.options.bench,
                "dump_dir": str(ctx.options.dump_dir) if ctx.options.dump_dir else None,
                "target": ctx.options.target,
                "profile": ctx.options.profile,
                "expect_isa": ctx.options.expect_isa,
                "sanitize": ctx.options.sanitize,
                "trace": ctx.options.trace,
            },
            wall_s=wall,
            performance=earlier.performance(),
            summary=summarize(earlier),
        )


def summarize(earlier: Earlier) -> PerformanceSummary | None:
    """The verdict's typed summary: the first benchmarked shape's time and speedup, and its
    percent of roofline and bound when the roofline rung ran; for a problem with a library
    path (``perf/baselines.py``) the speedups over it and ``torch.compile`` and the SOL
    score. None when nothing was timed."""
    timings = earlier.get(Timings)
    if timings is None or not timings.shapes:
        return None
    first = timings.shapes[0]
    roof = earlier.get(Roofline)
    record = first.record
    sol = None
    if record.get("library"):  # a GEMM-, convolution- or attention-like problem
        pct = roof.pct_of_roofline if roof else None
        roof_ms = first.median_ms * pct / 100 if pct is not None and math.isfinite(pct) else None
        sol = baselines.sol_score(
            first.median_ms,
            {
                "library": (record.get("library") or {}).get("median_ms"),
                "compiled": (record.get("reference_compiled") or {}).get("median_ms"),
            },
            roof_ms,
        )
    return PerformanceSummary(
        shape=first.label,
        time_ms=first.median_ms,
        speedup=first.speedup,
        pct_of_roofline=roof.pct_of_roofline if roof else None,
        bound=roof.bound if roof else None,
        speedup_vs_library=record.get("speedup_vs_library"),
        speedup_vs_compiled=record.get("speedup_vs_compiled"),
        sol=sol.score if sol else None,
        sol_baseline=sol.baseline if sol else None,
        sol_note=sol.reason if sol else None,
    )
