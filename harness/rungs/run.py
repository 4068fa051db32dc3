"""The ``run`` rung: the first call returned a plain dense ``torch.Tensor`` of the right kind.

Checks, against the reference computed after the call: ``type(out) is torch.Tensor``
(a subclass or lazy tensor fails, named), shape, exact dtype, device, dense
non-overlapping layout, no memory shared with an input, and no NaN/Inf where the
reference is finite. Crashes, hangs, early exits and exceptions of the first call land
here with their reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..metrics import compare
from ..verdict import RungResult
from .compile import _first_line
from .context import OutputLeaf, flatten

if TYPE_CHECKING:
    from .context import CallRecord, LadderContext


def call_failure(ctx: LadderContext, record: CallRecord) -> tuple[str, dict[str, object]] | None:
    """The reason and details when a call did not produce an output at all."""
    if record.gone is not None:
        return ctx.explain(
            f"{record.gone.reason} ({ctx.candidate.entry} on {record.inputs.label})"
        ), ctx.gone_details(record.gone)
    if record.error:
        error = record.error
        if error.get("exit"):
            reason = f"{ctx.candidate.entry} tried to end the worker ({_first_line(error)})"
        elif error.get("phase") == "sync":
            reason = f"the device failed after {ctx.candidate.entry} returned: {_first_line(error)}"
        elif error.get("phase") == "init":
            reason = f"building the entry point failed: {_first_line(error)}"
        else:
            reason = f"{ctx.candidate.entry} raised {_first_line(error)}"
        return ctx.explain(reason), {"error": error, "where": record.inputs.label}
    if not record.outputs:
        return ctx.explain("the worker reported no output"), {}
    return None


class RunRung:
    name = "run"
    gating = True

    def run(self, ctx: LadderContext) -> RungResult:
        record = ctx.first
        if record is None:
            return RungResult(self.name, False, self.gating, {}, "no first call was made")
        failure = call_failure(ctx, record)
        if failure is not None:
            return RungResult(self.name, False, self.gating, {}, failure[0], dict(failure[1]))
        reference = ctx.reference(record.inputs)
        ctx.remember_output_sizes(record.inputs, reference)
        problems = ctx.structure_problems(record.outputs[0], reference) + ctx.late_changes(record)
        metrics: dict[str, object] = {"elapsed_s": float(record.calls[0].get("elapsed_s") or 0.0)}
        if record.calls[0].get("launches") is not None:
            metrics["launches"] = int(record.calls[0]["launches"])
        if problems:
            return RungResult(
                self.name,
                False,
                self.gating,
                metrics,
                ctx.explain(problems[0]),
                {"problems": problems, "where": record.inputs.label},
            )
        for leaf, ref in zip(flatten(record.outputs[0]), flatten(reference), strict=True):
            if isinstance(leaf, OutputLeaf) and leaf.tensor is not None:
                result = compare(leaf.tensor, ref, ctx.problem.tolerance_for(ref.dtype))
                if result.nonfinite:
                    return RungResult(
                        self.name,
                        False,
                        self.gating,
                        metrics,
                        ctx.explain(
                            f"the output has {result.nonfinite} NaN/Inf element(s) where the reference is finite"
                        ),
                        {"worst": result.worst, "where": record.inputs.label},
                    )
        return RungResult(self.name, True, self.gating, metrics)
