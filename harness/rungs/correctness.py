"""The ``correctness`` rung: every shape x several trials against the reference, then inputs never seen.

Per shape, trial 1 sends new tensors; trials 2.. write new content into the same tensors
in place (same ``data_ptr``, ``id``, shape and ``_version``), so a replay cache keyed on
any of them returns a stale result. Every element is compared in the parent
(``metrics.compare``); GPU MODE problems also get their own ``check_implementation``
(which decides there; both verdicts are named). The first trial of the first shape is the
compile rung's ``FirstCall`` when it produced an output.

Each trial has its own seeded inputs, so trials that disagree do not yet say the kernel is
nondeterministic: the first failing trial's inputs are made again from its seed and called
once more. The same output again is a kernel wrong on some inputs ("fails on some inputs",
naming the failing trials' seeds); a different output from the same input is
"nondeterministic".

Then what the candidate was never shown (``rungs/inputs.py``): two shapes derived from the
checked ones with the secret (on a GPU a third between the checked and the benchmark
sizes), and (``rungs/stress.py``) one trial of rescaled, shifted inputs with the absolute
tolerance scaled to match, and one of mixed-scale inputs (scales far apart inside one
tensor) with each element's tolerance widened by how far the reference moves there. A
failure there says "an unseen shape", "rescaled inputs" or "mixed-scale inputs", not which
shape; the verdict lists the unseen shapes (``seeds``) once the check is over. Last, the
edge-input trials the problem asks for (``EDGE_INPUTS``, ``rungs/edges.py``: padded,
strided or broadcast views, a size-0 dimension, NaN and Inf), a failure naming the class,
what was done to which input, the (public) shape and the seed, and how a kernel gets it
right. Each of these calls has a time budget scaled from what the public calls took here
(``Inputs.budget``, measured around every public call), and a timeout says how long those
took.

Where the signal check (``harness/problems/signalcheck.py``) found a trivial answer passing the
problem's tolerance on a shape, that shape is judged relative to the output's scale
(``check_output``) and the rung's note says so.

The verdict names the tolerance used: declared (the dtype's default or ``TOLERANCE``) or
calibrated (``--calibrate``, ``CALIBRATE = True``: measured from the reference against
float64, ``harness/problems/calibrate.py``), and ``tol_spent``, the largest share of it
any element used (max of ``|out - ref| / (atol + rtol |ref|)``; over 1 fails).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..metrics import Comparison, combine
from ..problems.problemspec import EDGE_CLASSES
from ..verdict import RungResult
from .checks import OutputLeaf
from .common import Judged, call_failure, check_output
from .edges import HINTS, edge_trials
from .inputs import TrialInputs, flatten, shape_label
from .results import FirstCall
from .stress import make_mixed, make_stress, mixed_slack, stress_ratio

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier


@dataclass
class _Trial:
    """What one trial of a shape gave."""

    passed: bool
    bad: Comparison | None
    reason: str
    stale: bool
    label: str
    seed: int
    output: list[bytes]


def _join(numbers: list[int]) -> str:
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


#: past this many bytes an output's digest reads ``DIGEST_BLOCKS`` evenly spaced blocks of
#: it, not every byte (hashing 6 GB took 7 s a trial)
DIGEST_WHOLE_BYTES = 64 << 20
DIGEST_BLOCKS = 256
DIGEST_BLOCK_BYTES = 64 << 10


def output_digest(output: Any) -> list[bytes]:
    """A digest of each output tensor's bytes: what the stale-result test compares between
    trials (keeping the bytes themselves held a copy of every trial's output). A large
    output's digest covers evenly spaced blocks and its length: it only names why a trial
    that failed anyway failed (the same answer as the passing trial before it), so a rare
    collision could change that wording, never the verdict."""
    out = []
    for leaf in flatten(output):
        if isinstance(leaf, OutputLeaf) and leaf.tensor is not None and leaf.tensor.numel():
            data: Any = leaf.tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
            raw = data.numpy()
            digest = hashlib.blake2b(digest_size=32)
            if raw.nbytes <= DIGEST_WHOLE_BYTES:
                digest.update(raw)
            else:
                digest.update(raw.nbytes.to_bytes(8, "little"))
                step = (raw.nbytes - DIGEST_BLOCK_BYTES) // (DIGEST_BLOCKS - 1)
                for i in range(DIGEST_BLOCKS):
                    start = i * step
                    digest.update(raw[start : start + DIGEST_BLOCK_BYTES])
            out.append(digest.digest())
    return out


class CorrectnessRung:
    name = "correctness"
    gating = True

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        started, before = time.perf_counter(), dict(ctx.workers.call_seconds)
        result = self.check(ctx, earlier)
        seconds = {k: v - before.get(k, 0.0) for k, v in ctx.workers.call_seconds.items()}
        total = time.perf_counter() - started
        result.details["phase_s"] = {  # where the rung's seconds went
            "requests": round(seconds["requests"], 3),
            "settle": round(seconds["settle"], 3),
            "parent": round(total - seconds["requests"], 3),  # references, comparisons
        }
        return result

    def check(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        comparisons: list[Comparison] = []
        trials = max(1, ctx.options.trials)
        # taken, not read: at an upstream size the first call's inputs and output held
        # through every later trial were two more tensors of the input's size on the GPU
        first = earlier.take(FirstCall)
        explain = ctx.findings.explain
        for shape_index in range(len(ctx.inputs.shapes)):
            outcomes: list[_Trial] = []
            for trial in range(trials):
                if shape_index == 0 and trial == 0 and first and not first.record.failed:
                    record, first = first.record, None
                    if ctx.backend.interpreted_on(ctx.device) and record.calls:
                        # no JIT compile inside it: the worker's time is what a call costs
                        # (on a GPU the first call compiles, so it says nothing of that)
                        elapsed = record.calls[0].get("elapsed_s")
                        if isinstance(elapsed, (int, float)):
                            ctx.inputs.note_cost(record.inputs, float(elapsed))
                else:
                    inputs = ctx.inputs.make(shape_index, trial)
                    called = time.perf_counter()
                    record = ctx.workers.call(inputs, in_place=trial > 0)
                    if not record.failed:  # what a call costs here: the unseen budgets
                        ctx.inputs.note_cost(inputs, time.perf_counter() - called)
                failure = call_failure(ctx, record)
                if failure is not None:
                    return RungResult.fail(self, failure[0], combine(comparisons), failure[1])
                reference = ctx.inputs.reference(record.inputs)
                ctx.inputs.remember_output_sizes(record.inputs, reference)
                problems = ctx.checks.structure_problems(record.outputs[0], reference)
                problems += ctx.checks.late_changes(record)
                if problems:
                    reason = explain(f"{problems[0]} ({record.inputs.label})")
                    return RungResult.fail(
                        self, reason, combine(comparisons), {"problems": problems}
                    )
                passed, bad, reason, found = check_output(ctx, record, record.outputs[0], reference)
                comparisons.extend(found)
                current = output_digest(record.outputs[0])
                # stale: the content changed in place, the answer did not (and it was right before)
                stale = (
                    not passed
                    and trial > 0
                    and bool(outcomes)
                    and outcomes[-1].passed
                    and current == outcomes[-1].output
                )
                outcomes.append(
                    _Trial(
                        passed, bad, reason, stale, record.inputs.label, record.inputs.seed, current
                    )
                )
                # the call's inputs, outputs and reference go before the next call's arrive
                del record, reference
            failed = [i for i, o in enumerate(outcomes) if not o.passed]
            if not failed:
                continue
            worst = outcomes[failed[0]]
            bad = worst.bad
            details: dict[str, Any] = {"where": worst.label}
            if bad is not None:
                details["worst"] = bad.worst
                details["tolerance"] = bad.tolerance.as_dict()
            metrics = bad.metrics() if bad is not None else combine(comparisons)
            metrics["tol_spent"] = _spent(comparisons)
            stale_outcome = next((o for o in outcomes if o.stale), None)
            if stale_outcome is not None:
                reason = (
                    "returned a stale result when input content changed in place "
                    f"(replay cache keyed on pointer/id/_version/shape?) ({stale_outcome.label})"
                )
            elif len(failed) < len(outcomes):
                again = ctx.workers.call(ctx.inputs.make(shape_index, failed[0], record=False))
                failure = call_failure(ctx, again)
                if failure is not None:
                    return RungResult.fail(self, failure[0], combine(comparisons), failure[1])
                repeats = output_digest(again.outputs[0]) == worst.output
                details["seeds"] = [outcomes[i].seed for i in failed]
                details["same_input_again"] = "same output" if repeats else "different output"
                reason = _disagreement(outcomes, failed, repeats, ctx.inputs.shapes[shape_index])
            else:
                reason = f"{worst.reason} ({worst.label})"
            return RungResult.fail(self, explain(reason), _short(metrics), details)
        unseen = ctx.inputs.unseen_shapes()
        extra = 0
        for index in range(len(unseen)):
            failed_result = self.unseen_trial(ctx, ctx.inputs.make_unseen(index), comparisons)
            if failed_result is not None:
                return failed_result
            extra += 1
        for make in (make_stress, make_mixed):  # made one at a time, as the edge trials
            stress = make(ctx.inputs)
            if stress is None:
                continue
            failed_result = self.unseen_trial(ctx, stress, comparisons)
            stress = None
            if failed_result is not None:
                return failed_result
            extra += 1
        edges = []
        for edge in edge_trials(ctx.inputs):
            failed_result = self.unseen_trial(ctx, edge, comparisons)
            if failed_result is not None:
                return failed_result
            edges.append(edge.kind)
            extra += 1
        metrics = combine(comparisons)
        summary: dict[str, Any] = {
            k: metrics[k] for k in ("max_abs", "max_rel", "rmse", "psnr", "cossim") if k in metrics
        }
        summary["tol_spent"] = _spent(comparisons)
        summary["checks"] = len(ctx.inputs.shapes) * trials + extra
        if extra:
            summary["unseen"] = extra
        if edges:
            summary["edge"] = len(edges)
        notes = []
        shapes = ctx.problem.shape_note(ctx.device) if ctx.problem.shape_note else ""
        if shapes and not ctx.options.shapes:
            notes.append(f"shapes {', '.join(shape_label(s) for s in ctx.inputs.shapes)}: {shapes}")
        signal, findings = ctx.inputs.signal_summary()
        if signal:
            notes.append(signal)
        held = ctx.inputs.held_sizes()
        if held and unseen:
            notes.append(
                "the unseen shapes keep "
                + "; ".join(f"{k} as given ({why})" for k, why in held.items())
            )
        said: dict[str, Any] = {"tolerance": _tolerance_used(comparisons)}
        calibration_note, calibration = ctx.inputs.calibration_summary()
        if ctx.inputs.calibrating:
            said["calibration"] = calibration
            notes.append(_calibrated_note(said["tolerance"], summary))
            if calibration_note:  # a shape nothing was measured on: the declared one there
                notes.append(calibration_note)
        if findings:
            said["signal"] = findings
        if held:
            said["held_sizes"] = held
        cost = ctx.inputs.cost_summary()
        if cost:
            said["cost"] = cost
        if edges:
            said["edge_inputs"] = edges
        return RungResult.passed(self, summary, "; ".join(notes), said)

    def unseen_trial(
        self, ctx: LadderContext, inputs: TrialInputs, comparisons: list[Comparison]
    ) -> RungResult | None:
        """One call on a shape or inputs the candidate never saw; a failed result or None."""
        explain = ctx.findings.explain
        edge = inputs.kind in EDGE_CLASSES
        # an edge trial is of a public shape: its label names the shape and the seed, as a
        # public trial's failure does, and the hint says how a kernel gets it right
        what = inputs.label if edge else _WHAT[inputs.kind]
        hint = f"; {HINTS[inputs.kind]}" if edge else ""
        where: dict[str, Any] = {"where": inputs.label}
        if edge:
            where.update({"edge": inputs.kind, "seeds": [inputs.seed]})
        budget, spent = ctx.inputs.budget(inputs)
        record = ctx.workers.call(inputs, timeout_s=budget)
        failure = call_failure(ctx, record)
        if failure is not None:
            reason = failure[0]
            if spent and record.gone is not None and "timed out" in record.gone.reason:
                reason = f"{reason}; {spent}"
            details = {**failure[1], **where} if edge else failure[1]
            return RungResult.fail(
                self, f"on {what}: {reason}{hint}", combine(comparisons), details
            )
        reference = ctx.inputs.reference(record.inputs)
        problems = ctx.checks.structure_problems(record.outputs[0], reference)
        problems += ctx.checks.late_changes(record)
        if problems:
            reason = explain(f"wrong on {what}: {problems[0]}{hint}")
            return RungResult.fail(self, reason, combine(comparisons), where)
        scale = stress_ratio(inputs, reference) if inputs.kind == "stress" else 1.0
        slack = None
        if inputs.kind == "mixed":
            if not _finite(reference):
                return None  # the reference itself overflows on these scales: no verdict
            slack = mixed_slack(ctx.inputs, inputs, reference)
        passed, bad, reason, found = check_output(
            ctx, record, record.outputs[0], reference, atol_scale=scale, slack=slack
        )
        comparisons.extend(found)
        if passed:
            return None
        details = dict(where)
        if bad is not None:
            details["worst"] = bad.worst
            details["tolerance"] = bad.tolerance.as_dict()
        metrics = bad.metrics() if bad is not None else combine(comparisons)
        metrics["tol_spent"] = _spent(comparisons)
        return RungResult.fail(
            self, explain(f"wrong on {what}: {reason}{hint}"), _short(metrics), details
        )


_WHAT = {
    "unseen": "an unseen shape (a size the candidate was never shown)",
    "stress": "rescaled inputs (values outside the default distribution)",
    "mixed": "mixed-scale inputs (scales far apart inside one tensor: rows, a column, a "
    "spike or a constant block)",
}


def _finite(reference: Any) -> bool:
    return all(
        bool(torch.isfinite(t).all())
        for t in flatten(reference)
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
    )


def _disagreement(
    outcomes: list[_Trial], failed: list[int], repeats: bool, shape: dict[str, Any]
) -> str:
    """Why a shape's trials disagree: its inputs (the failing input, called again, gave the
    same output) or the kernel (the same input gave another output)."""
    worst = outcomes[failed[0]]
    passed = [i + 1 for i in range(len(outcomes)) if i not in failed]
    seeds = [outcomes[i].seed for i in failed]
    tally = (
        f"trial {_join([i + 1 for i in failed])}/{len(outcomes)} "
        f"(seed{'s' if len(seeds) > 1 else ''} {_join(seeds)}) failed, {_join(passed)} passed"
    )
    where = f"shape {shape_label(shape)}"
    if repeats:
        return (
            f"fails on some inputs: {tally}; each trial has its own seeded inputs and "
            f"trial {failed[0] + 1}'s gave the same output again ({where}): {worst.reason}"
        )
    return (
        f"nondeterministic: the same input (trial {failed[0] + 1}, seed {worst.seed}) gave a "
        f"different output when called again; {tally} ({where}): {worst.reason}"
    )


def _spent(comparisons: list[Comparison]) -> float:
    """The largest share of its tolerance any compared element used (``Judged.spent``)."""
    return max((c.spent for c in comparisons if isinstance(c, Judged)), default=0.0)


def _tolerance_used(comparisons: list[Comparison]) -> list[dict[str, Any]]:
    """Each distinct tolerance the comparisons used (declared or calibrated), loosest
    atol first, with the share of it spent."""
    used: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in comparisons:
        doc = c.tolerance.as_dict()
        key = tuple(doc.values())
        spent = c.spent if isinstance(c, Judged) else 0.0
        if key in used:
            used[key]["spent"] = max(used[key]["spent"], spent)
        else:
            used[key] = {**doc, "spent": spent}
    return sorted(used.values(), key=lambda d: -d["atol"])


def _calibrated_note(used: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    calibrated = [u for u in used if u["source"] == "calibrated"]
    if not calibrated:
        return "calibration measured nothing tighter: declared tolerance used"
    atol = max(u["atol"] for u in calibrated)
    rtol = max(u["rtol"] for u in calibrated)
    return (
        f"tolerance calibrated against float64 (atol<={atol:.2g} rtol<={rtol:.2g}), "
        f"{summary['tol_spent']:.0%} of it spent"
    )


def _short(metrics: dict[str, Any]) -> dict[str, Any]:
    keys = ("max_abs", "max_rel", "rmse", "psnr", "cossim", "mismatches", "elements", "tol_spent")
    return {k: metrics[k] for k in keys if k in metrics}
