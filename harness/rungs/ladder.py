"""The ladder: run rungs in order, stop at the first failed gating rung, build the Verdict.

``Rung`` is the protocol every rung implements: ``name``, ``gating``, ``run(ctx) ->
RungResult``. Rungs after a failed gate are listed as skipped. A rung that crashes is a
harness bug and is reported as that rung failing with "harness error", never as a pass.
A rung may define ``enabled(ctx)``: the performance rungs (benchmark, roofline, dumps,
profile, trace) run only when asked for (``--bench``, ``--dump``/``--target``,
``--profile``, ``--trace``).
A rung that reports ``ok=None`` was skipped for a reason (no GPU, no ncu) and does not
fail the verdict; only ``ok=False`` does.
"""

from __future__ import annotations

import platform
import sys
import time
import traceback
from typing import Protocol

from ..errors import UsageError
from ..verdict import RungResult, Verdict
from .anticheat import AntiCheatRung
from .benchmark import BenchmarkRung
from .compile import CompileRung
from .context import REFERENCE_PRECISION_FLAGS, LadderContext, shape_label
from .correctness import CorrectnessRung
from .dump import DumpRung
from .precheck import PreCheckRung
from .profile import ProfileRung
from .roofline import RooflineRung
from .run import RunRung
from .trace import TraceRung


class Rung(Protocol):
    name: str
    gating: bool

    def run(self, ctx: LadderContext) -> RungResult: ...


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
                TraceRung(),
            ]
        )

    def run(self, ctx: LadderContext) -> Verdict:
        started = time.monotonic()
        results: list[RungResult] = []
        stopped = False
        for rung in self.rungs:
            enabled = getattr(rung, "enabled", None)
            if enabled is not None and not enabled(ctx):
                continue
            if stopped:
                results.append(RungResult(rung.name, None, rung.gating))
                continue
            try:
                result = rung.run(ctx)
            except UsageError:
                raise
            except Exception as exc:
                result = RungResult(
                    rung.name,
                    False,
                    rung.gating,
                    {},
                    f"harness error in {rung.name}: {type(exc).__name__}: {exc}",
                    {"traceback": traceback.format_exc()[-3000:]},
                )
            results.append(result)
            if result.ok is False and rung.gating:
                stopped = True
        ctx.close()
        return self._verdict(ctx, results, time.monotonic() - started)

    def _verdict(self, ctx: LadderContext, results: list[RungResult], wall: float) -> Verdict:
        import torch

        env = dict(ctx.environment)
        env.setdefault("device", ctx.device)
        env["parent"] = {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "host": platform.node(),
        }
        env["reference_precision"] = REFERENCE_PRECISION_FLAGS
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
            integrity=list(ctx.integrity),
            seeds={
                "public": [ctx.problem.public_seed(i) for i in range(len(ctx.shapes))],
                "secret": ctx.secret,
                "shapes": [shape_label(s) for s in ctx.shapes],
            },
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
                "trace": getattr(ctx.options, "trace", False),
            },
            wall_s=wall,
            performance=dict(ctx.performance),
        )
