"""The ``run`` rung: the first call returned a plain dense ``torch.Tensor`` of the right kind.

Checks, against the reference computed after the call: ``type(out) is torch.Tensor``
(a subclass or lazy tensor fails, named), shape, exact dtype (where a GPU MODE problem's
own ``check_implementation`` judges dtype, it decides), device, dense non-overlapping
layout, no memory shared with an input or an earlier call's output, and no NaN/Inf where
the reference is finite. When the content is wrong too, the reason leads with the content
(a nop that returns the data's output tensor unwritten is wrong, whatever else it is);
the problem's own check is named beside ours. Crashes, hangs, early exits and exceptions
of the first call (the compile rung's ``FirstCall``) land here with their reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..verdict import RungResult
from .checks import OutputLeaf
from .common import call_failure, check_output, compare_where_it_lives, problem_check
from .inputs import flatten
from .results import FirstCall

_ALIASING = ("shares memory with input", "shares storage with the output of an earlier call")

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
            where: dict[str, Any] = {"problems": problems, "where": record.inputs.label}
            lead = problems[0]
            if all(any(a in p for a in _ALIASING) for p in problems):
                good, bad, content, _ = check_output(ctx, record, record.outputs[0], reference)
                if not good:  # the content is the real failure; the aliasing comes second
                    lead = f"{content}; also, {problems[0]}"
                    if bad is not None:
                        where["worst"] = bad.worst
            elif ctx.problem.check is not None:
                ok, message = problem_check(ctx, record, record.outputs[0])
                lead += f" (the problem's check_implementation: {'passed' if ok else message})"
            return RungResult.fail(self, explain(lead), metrics, where)
        for leaf, ref in zip(flatten(record.outputs[0]), flatten(reference), strict=True):
            if isinstance(leaf, OutputLeaf) and leaf.tensor is not None:
                # on the reference's GPU when large: an upstream-sized output (1.6 G
                # elements) took minutes in float64 on the host before the first call passed
                result = compare_where_it_lives(
                    leaf.tensor, ref, ctx.problem.tolerance_for(ref.dtype)
                )
                if result.nonfinite:
                    reason = f"the output has {result.nonfinite} NaN/Inf element(s) where the reference is finite"
                    if (
                        ctx.inputs.slots
                    ):  # the data's own output tensor(s), poisoned before each call
                        reason += (
                            " (the provided output tensor holds NaN before each call: like torch.empty's,"
                            " its content is undefined; write every element, and zero it before"
                            " accumulating into it)"
                        )
                    worst = {"worst": result.worst, "where": record.inputs.label}
                    return RungResult.fail(self, explain(reason), metrics, worst)
        return RungResult.passed(self, metrics)
