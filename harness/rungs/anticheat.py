"""The ``anti-cheat`` rung: behaviour under repetition, and everything the guards saw.

A burst of back-to-back calls on the same inputs (the shape of a timing loop) must give
the reference every time — a candidate that behaves differently after the first calls
or in "benchmark mode" fails here. Then the worker is closed and every integrity finding
of the whole session fails the rung, named: forbidden library ops at run time, no kernel
of the declared backend launched, monkeypatched timers/validators/harness internals,
guard refusals (threads, processes, writes outside the temp dir, network, frame walking),
inputs modified, output changed after return, threads or signal handlers left behind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..verdict import RungResult
from .correctness import check_output
from .run import call_failure

if TYPE_CHECKING:
    from .context import LadderContext

BURST_TRIAL = 1000  # trial index for the burst's seed: distinct from the correctness trials


class AntiCheatRung:
    name = "anti-cheat"
    gating = True

    def run(self, ctx: LadderContext) -> RungResult:
        burst = max(2, ctx.options.burst)
        record = ctx.call(ctx.make_inputs(0, BURST_TRIAL), repeat=burst, burst=True)
        failure = call_failure(ctx, record)
        if failure is not None:
            return RungResult(
                self.name,
                False,
                self.gating,
                {},
                f"during {burst} back-to-back calls: {failure[0]}",
                dict(failure[1]),
            )
        reference = ctx.reference(record.inputs)
        for index, output in enumerate(record.outputs):
            problems = ctx.structure_problems(output, reference) + ctx.late_changes(record, index)
            passed, bad, reason, _ = (
                check_output(ctx, record, output, reference)
                if not problems
                else (False, None, problems[0], [])
            )
            if not passed:
                details = {"where": f"{record.inputs.label}, call {index + 1} of {burst}"}
                if bad is not None:
                    details["worst"] = bad.worst  # type: ignore[assignment]
                return RungResult(
                    self.name,
                    False,
                    self.gating,
                    {},
                    ctx.explain(
                        f"call {index + 1} of {burst} back-to-back calls on the same inputs returned a wrong result "
                        f"(behaves differently when called repeatedly, as a benchmark does): {reason}"
                    ),
                    details,
                )
        ctx.finish()
        metrics = {"calls": ctx.calls_made, "burst": burst}
        if ctx.integrity:
            more = f" (+{len(ctx.integrity) - 1} more)" if len(ctx.integrity) > 1 else ""
            return RungResult(
                self.name,
                False,
                self.gating,
                metrics,
                ctx.integrity[0] + more,
                {"findings": [], "integrity": ctx.integrity},
            )
        return RungResult(self.name, True, self.gating, metrics)
