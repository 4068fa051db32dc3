"""The ``run`` rung: the first call returned a plain dense ``torch.Tensor`` of the right kind.

Checks, against the reference computed after the call: ``type(out) is torch.Tensor``
(a subclass or lazy tensor fails, named), shape, exact dtype, device, dense
non-overlapping layout, no memory shared with an input, and no NaN/Inf where the
reference is finite. Crashes, hangs, early exits and exceptions of the first call (the
compile rung's ``FirstCall``) land here with their reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..metrics import compare
from ..verdict import RungResult
from .checks import OutputLeaf
from .common import call_failure
from .inputs import flatten
from .results import FirstCall

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier


class RunRung:
    name = "run"
    gating = True

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        first = earlier.get(FirstCall)
        if first is None:
            return RungResult.fail(self, "no first call was made")
        record = first.record
        failure = call_failure(ctx, record)
        if failure is not None:
            return RungResult.fail(self, failure[0], details=failure[1])
        reference = ctx.inputs.reference(record.inputs)
        ctx.inputs.remember_output_sizes(record.inputs, reference)
        problems = ctx.checks.structure_problems(record.outputs[0], reference)
        problems += ctx.checks.late_changes(record)
        metrics: dict[str, Any] = {"elapsed_s": float(record.calls[0].get("elapsed_s") or 0.0)}
        if record.calls[0].get("launches") is not None:
            metrics["launches"] = int(record.calls[0]["launches"])
        explain = ctx.findings.explain
        if problems:
            where = {"problems": problems, "where": record.inputs.label}
            return RungResult.fail(self, explain(problems[0]), metrics, where)
        for leaf, ref in zip(flatten(record.outputs[0]), flatten(reference), strict=True):
            if isinstance(leaf, OutputLeaf) and leaf.tensor is not None:
                result = compare(leaf.tensor, ref, ctx.problem.tolerance_for(ref.dtype))
                if result.nonfinite:
                    reason = f"the output has {result.nonfinite} NaN/Inf element(s) where the reference is finite"
                    worst = {"worst": result.worst, "where": record.inputs.label}
                    return RungResult.fail(self, explain(reason), metrics, worst)
        return RungResult.passed(self, metrics)
