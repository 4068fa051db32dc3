"""The ``correctness`` rung: every shape x several trials against the reference.

Per shape, trial 1 sends new tensors; trials 2.. write new content into the same tensors
in place (same ``data_ptr``, ``id``, shape and ``_version``), so a replay cache keyed on
any of them returns a stale result. Every element is compared in the parent
(``metrics.compare``); GPU MODE problems also get their own ``check_implementation``. A
shape whose trials disagree fails as nondeterministic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..metrics import Comparison, combine, compare
from ..verdict import RungResult
from .context import OutputLeaf, flatten, shape_label
from .run import call_failure

if TYPE_CHECKING:
    from .context import CallRecord, LadderContext


def _join(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def output_bytes(output: Any) -> list[bytes]:
    out = []
    for leaf in flatten(output):
        if isinstance(leaf, OutputLeaf) and leaf.tensor is not None and leaf.tensor.numel():
            out.append(bytes(leaf.tensor.contiguous().reshape(-1).view(torch.uint8).numpy()))
    return out


def rebuild(output: Any, device: str) -> Any:
    """The output as tensors on the target device (for a GPU MODE ``check_implementation``)."""
    if isinstance(output, tuple):
        return tuple(rebuild(v, device) for v in output)
    if isinstance(output, list):
        return [rebuild(v, device) for v in output]
    if isinstance(output, dict):
        return {k: rebuild(v, device) for k, v in output.items()}
    if isinstance(output, OutputLeaf):
        return output.tensor.to(device) if output.tensor is not None else output.meta.get("value")
    return output


def check_output(
    ctx: LadderContext, record: CallRecord, output: Any, reference: Any
) -> tuple[bool, Comparison | None, str, list[Comparison]]:
    """(passed, first failing comparison, reason, all comparisons) for one output tree."""
    comparisons: list[Comparison] = []
    first_bad: Comparison | None = None
    for leaf, ref in zip(flatten(output), flatten(reference), strict=True):
        if (
            not isinstance(ref, torch.Tensor)
            or not isinstance(leaf, OutputLeaf)
            or leaf.tensor is None
        ):
            continue
        result = compare(leaf.tensor, ref, ctx.problem.tolerance_for(ref.dtype))
        comparisons.append(result)
        if not result.ok and first_bad is None:
            first_bad = result
    reason = first_bad.reason if first_bad else ""
    if ctx.problem.check is not None:
        # GPU MODE: the suite's own check is the authority on tolerance; NaN rules still apply.
        verdict = ctx.problem.check(_clone_inputs(record), rebuild(output, ctx.device))
        good, message = (
            (verdict[0], verdict[1]) if isinstance(verdict, tuple) else (not verdict, verdict)
        )
        nan_bad = next((c for c in comparisons if c.nonfinite), None)
        if not good:
            return (
                False,
                first_bad or (comparisons[0] if comparisons else None),
                f"check_implementation: {str(message)[:300]}",
                comparisons,
            )
        if nan_bad is not None:
            return False, nan_bad, nan_bad.reason, comparisons
        return True, None, "", comparisons
    return first_bad is None, first_bad, reason, comparisons


def _clone_inputs(record: CallRecord) -> Any:
    from .context import _clone

    return _clone(record.inputs.pristine)


class CorrectnessRung:
    name = "correctness"
    gating = True

    def run(self, ctx: LadderContext) -> RungResult:
        comparisons: list[Comparison] = []
        trials = max(1, ctx.options.trials)
        for shape_index in range(len(ctx.shapes)):
            outcomes: list[tuple[bool, Comparison | None, str, bool, str]] = []
            previous: list[bytes] | None = None
            for trial in range(trials):
                if (
                    shape_index == 0
                    and trial == 0
                    and ctx.first is not None
                    and not ctx.first.failed
                ):
                    record = ctx.first
                else:
                    record = ctx.call(ctx.make_inputs(shape_index, trial), in_place=trial > 0)
                failure = call_failure(ctx, record)
                if failure is not None:
                    return RungResult(
                        self.name,
                        False,
                        self.gating,
                        combine(comparisons),
                        failure[0],
                        dict(failure[1]),
                    )
                reference = ctx.reference(record.inputs)
                ctx.remember_output_sizes(record.inputs, reference)
                problems = ctx.structure_problems(record.outputs[0], reference)
                problems += ctx.late_changes(record)
                if problems:
                    return RungResult(
                        self.name,
                        False,
                        self.gating,
                        combine(comparisons),
                        ctx.explain(f"{problems[0]} ({record.inputs.label})"),
                        {"problems": problems},
                    )
                passed, bad, reason, found = check_output(ctx, record, record.outputs[0], reference)
                comparisons.extend(found)
                current = output_bytes(record.outputs[0])
                # stale: the content changed in place, the answer did not (and it was right before)
                stale = (
                    not passed
                    and trial > 0
                    and bool(outcomes)
                    and outcomes[-1][0]
                    and previous is not None
                    and current == previous
                )
                outcomes.append((passed, bad, reason, stale, record.inputs.label))
                previous = current
            failed = [i for i, o in enumerate(outcomes) if not o[0]]
            if not failed:
                continue
            first = outcomes[failed[0]]
            bad = first[1]
            details: dict[str, Any] = {"where": first[4]}
            if bad is not None:
                details["worst"] = bad.worst
                details["tolerance"] = bad.tolerance.as_dict()
            metrics = bad.metrics() if bad is not None else combine(comparisons)
            stale_outcome = next((o for o in outcomes if o[3]), None)
            if stale_outcome is not None:
                reason = (
                    "returned a stale result when input content changed in place "
                    f"(replay cache keyed on pointer/id/_version/shape?) ({stale_outcome[4]})"
                )
            elif len(failed) < len(outcomes):
                passed_ids = [i + 1 for i in range(len(outcomes)) if i not in failed]
                reason = (
                    f"nondeterministic: trial {_join([i + 1 for i in failed])}/{len(outcomes)} failed, "
                    f"{_join(passed_ids)} passed (shape {shape_label(ctx.shapes[shape_index])}): {first[2]}"
                )
            else:
                reason = f"{first[2]} ({first[4]})"
            return RungResult(
                self.name, False, self.gating, _short(metrics), ctx.explain(reason), details
            )
        metrics = combine(comparisons)
        summary: dict[str, Any] = {
            k: metrics[k] for k in ("max_abs", "max_rel", "rmse", "psnr", "cossim") if k in metrics
        }
        summary["checks"] = len(ctx.shapes) * trials
        return RungResult(self.name, True, self.gating, summary)


def _short(metrics: dict[str, Any]) -> dict[str, Any]:
    keys = ("max_abs", "max_rel", "rmse", "psnr", "cossim", "mismatches", "elements")
    return {k: metrics[k] for k in keys if k in metrics}
