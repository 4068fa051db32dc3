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

from typing import TYPE_CHECKING, Any

from ..verdict import RungResult
from .common import call_failure, check_output

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier

BURST_TRIAL = 1000  # trial index for the burst's seed: distinct from the correctness trials


class AntiCheatRung:
    name = "anti-cheat"
    gating = True

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        burst = max(2, ctx.options.burst)
        inputs = ctx.inputs.make(0, BURST_TRIAL)
        record = ctx.workers.call(inputs, repeat=burst, burst=True)
        failure = call_failure(ctx, record)
        if failure is not None:
            reason = f"during {burst} back-to-back calls: {failure[0]}"
            return RungResult.fail(self, reason, details=failure[1])
        reference = ctx.inputs.reference(record.inputs)
        for index, output in enumerate(record.outputs):
            problems = ctx.checks.structure_problems(output, reference)
            problems += ctx.checks.late_changes(record, index)
            passed, bad, reason, _ = (
                check_output(ctx, record, output, reference)
                if not problems
                else (False, None, problems[0], [])
            )
            if not passed:
                details: dict[str, Any] = {
                    "where": f"{record.inputs.label}, call {index + 1} of {burst}"
                }
                if bad is not None:
                    details["worst"] = bad.worst
                return RungResult.fail(
                    self,
                    ctx.findings.explain(
                        f"call {index + 1} of {burst} back-to-back calls on the same inputs returned a wrong result "
                        f"(behaves differently when called repeatedly, as a benchmark does): {reason}"
                    ),
                    details=details,
                )
        ctx.workers.finish()
        metrics = {"calls": ctx.workers.calls_made, "burst": burst}
        found = ctx.findings.messages
        if found:
            more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
            details = {"findings": [], "integrity": list(found)}
            return RungResult.fail(self, found[0] + more, metrics, details)
        return RungResult.passed(self, metrics)
