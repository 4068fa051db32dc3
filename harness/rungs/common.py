"""Helpers more than one rung uses: why a call failed, whether an output is right.

Rungs import these (and the context's parts), never each other.

- ``first_line(error)``: the line of an error worth showing, with the candidate line;
- ``call_failure(ctx, record)``: the reason and details when a call produced no output;
- ``check_output(ctx, record, output, reference)``: every element compared in the parent
  (``metrics.compare``; relative to the output's scale where the signal check found a
  trivial answer passing), plus a GPU MODE problem's own ``check_implementation``, which
  decides dtype and tolerance there (ours is reported beside it, and NaN never passes);
  with ``--calibrate`` each output's tolerance is first tightened to the reference's own
  measured error (``harness/problems/calibrate.py``, through ``Inputs.calibrated``);
- ``Judged``: a comparison with the share of its tolerance the output spent (``spent``:
  max over elements of ``|got - expected| / (atol + rtol |expected|)``, 1 at the edge);
- ``scrub_paths(text)``: a message without the harness's own file paths.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..metrics import CHUNK_ELEMENTS, Comparison, compare, one_thread_if_small
from ..printable import printable
from ..problems.problemspec import Tolerance
from .checks import OutputLeaf
from .inputs import clone, flatten


@dataclass
class Judged(Comparison):
    """A comparison and how much of its tolerance the output spent (0: exact; over 1:
    outside it somewhere; inf: a NaN/Inf where the reference is finite)."""

    spent: float = 0.0

    @classmethod
    def of(cls, result: Comparison, spent: float) -> Judged:
        return cls(**{f.name: getattr(result, f.name) for f in fields(Comparison)}, spent=spent)


def spent_fraction(
    got: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    slack: torch.Tensor | None = None,
    chunk: int = CHUNK_ELEMENTS,
) -> float:
    """Max over elements of ``|got - expected| / (atol + rtol |expected| + slack)``, in
    float64 where ``expected`` lives; elements non-finite in both are left out. Gathered
    ``chunk`` elements at a time (as ``metrics.compare`` does past that size): the float64
    copies of a whole upstream-sized output are several times the output."""
    if not (expected.is_floating_point() or expected.is_complex()) or not expected.numel():
        return 0.0
    device = expected.device if expected.numel() >= DEVICE_COMPARE_ELEMENTS else "cpu"

    def flat(t: torch.Tensor) -> torch.Tensor:
        t = t.detach()
        return (torch.view_as_real(t) if t.is_complex() else t).reshape(-1)

    e_all, g_all = flat(expected), flat(got)
    s_all = flat(slack) if slack is not None else None
    worst = 0.0
    with one_thread_if_small(e_all.numel()):
        for start in range(0, e_all.numel(), chunk):
            part = slice(start, start + chunk)
            spent = _spent_in(
                e_all[part].to(device, torch.float64),
                g_all[part].to(device, torch.float64),
                tolerance,
                s_all[part].to(device, torch.float64) if s_all is not None else None,
            )
            if spent == math.inf:
                return spent
            worst = max(worst, spent)
    return worst


def _spent_in(
    e: torch.Tensor, g: torch.Tensor, tolerance: Tolerance, extra: torch.Tensor | None
) -> float:
    """``spent_fraction`` of one chunk, already float64 on the comparing device."""
    finite = torch.isfinite(e)
    if bool((finite & ~torch.isfinite(g)).any()):
        return math.inf
    e, g = e[finite], g[finite]
    bound = tolerance.atol + tolerance.rtol * e.abs()
    if extra is not None:
        extra = extra[finite]
        bound = bound + torch.where(torch.isfinite(extra), extra.abs(), torch.zeros_like(extra))
    diff = (g - e).abs()
    if not diff.numel():
        return 0.0
    if bool(((bound == 0) & (diff > 0)).any()):
        return math.inf
    return float((diff / bound.clamp_min(1e-300)).max())


_HARNESS_DIR = str(Path(__file__).resolve().parents[1])
_HARNESS_PATH = re.compile(re.escape(_HARNESS_DIR) + r"[/\\][\w/\\.-]*")
_TIMEOUT_HINT = " (a smaller --shapes or a longer --timeout may help)"
# from this many elements a reference on a GPU is compared there (in float64, as on the
# CPU): GPU MODE's 8192 x 8192 add took seconds on the parent's CPU
DEVICE_COMPARE_ELEMENTS = 1 << 22

if TYPE_CHECKING:
    from .checks import CallRecord
    from .context import LadderContext


def scrub_paths(text: str) -> str:
    """``text`` without paths into the harness's own source (they mean nothing to the
    candidate's author): ``.../harness/worker.py`` becomes ``the harness``."""
    return _HARNESS_PATH.sub("the harness", text)


def first_line(error: dict[str, object]) -> str:
    text = scrub_paths(str(error.get("message") or "").strip())
    lines = text.splitlines() or ["unknown error"]
    # "CUDA error: an illegal memory access..." leads; a Triton CompilationError ("at 13:8:")
    # shows the source first and the error last
    first = lines[-1] if lines[0].rstrip().endswith(":") else lines[0]
    frames = error.get("candidate_frames") or []
    if isinstance(frames, list) and frames:
        last = frames[-1]
        first = f"{first} (line {last.get('line')}: {last.get('code')})"
    # the candidate's words: no control character reaches a terminal (``printable``)
    return printable(first, newlines=False)


def call_failure(ctx: LadderContext, record: CallRecord) -> tuple[str, dict[str, Any]] | None:
    """The reason and details when a call did not produce an output at all."""
    entry = ctx.candidate.entry
    explain = ctx.findings.explain
    if record.gone is not None:
        hint = _TIMEOUT_HINT if "timed out" in record.gone.reason else ""
        return explain(f"{record.gone.reason} ({entry} on {record.inputs.label}){hint}"), dict(
            ctx.checks.gone_details(record.gone)
        )
    if record.error:
        error = record.error
        if error.get("exit"):
            reason = f"{entry} tried to end the worker ({first_line(error)})"
        elif error.get("phase") == "sync":
            reason = f"the device failed after {entry} returned: {first_line(error)}"
        elif error.get("phase") == "init":
            reason = f"building the entry point failed: {first_line(error)}"
        else:
            reason = f"{entry} raised {first_line(error)}"
        return explain(reason), {"error": error, "where": record.inputs.label}
    if not record.outputs:
        return explain("the worker reported no output"), {}
    return None


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
    ctx: LadderContext,
    record: CallRecord,
    output: Any,
    reference: Any,
    atol_scale: float = 1.0,
    slack: list[torch.Tensor | None] | None = None,
) -> tuple[bool, Comparison | None, str, list[Comparison]]:
    """(passed, first failing comparison, reason, all comparisons) for one output tree.

    ``atol_scale``: the stress trial's (its inputs were rescaled, so is the absolute
    tolerance). ``slack``: per output tensor, an extra tolerance per element (the
    mixed-scale trial's). Where a trivial answer passes the tolerance on this call's shape
    (``Inputs.tightened``, the signal check) that output is judged relative to its scale,
    and the reason says so. Where the problem has its own ``check_implementation`` (GPU
    MODE), that check decides -- dtype and tolerance included -- and the reason names
    both verdicts; an output judged relative to its scale must pass that too."""
    comparisons: list[Comparison] = []
    first_bad: Comparison | None = None
    tight_bad: Comparison | None = None
    position = -1  # which tensor of the reference (the signal check's numbering)
    for leaf, ref in zip(flatten(output), flatten(reference), strict=True):
        if isinstance(ref, torch.Tensor):
            position += 1
        if (
            not isinstance(ref, torch.Tensor)
            or not isinstance(leaf, OutputLeaf)
            or leaf.tensor is None
        ):
            continue
        tolerance = ctx.problem.tolerance_for(_judged_dtype(leaf.tensor.dtype, ref.dtype))
        if ctx.inputs.calibrating:
            tolerance = ctx.inputs.calibrated(record.inputs, position, tolerance)
        if atol_scale != 1.0:
            tolerance = replace(tolerance, atol=tolerance.atol * atol_scale)
        tight = ctx.inputs.tightened(record.inputs, position, reference, tolerance)
        if tight is not None:
            tolerance = tight[0]
        extra = slack[position] if slack is not None and position < len(slack) else None
        expected = ref if leaf.tensor.shape == ref.shape else ref.reshape(leaf.tensor.shape)
        if extra is not None and extra.shape != expected.shape:
            extra = extra.reshape(expected.shape)
        compared = compare_where_it_lives(leaf.tensor, expected, tolerance, extra)
        result = Judged.of(compared, spent_fraction(leaf.tensor, expected, tolerance, extra))
        if tolerance.calibrated and not result.ok:
            declared = ctx.problem.tolerance_for(_judged_dtype(leaf.tensor.dtype, ref.dtype))
            result.reason += (
                f" (calibrated tolerance, from the reference's own error against float64; "
                f"declared atol={declared.atol:g} rtol={declared.rtol:g})"
            )
        if tight is not None and not result.ok:
            result.reason += (
                f" (judged relative to the output's scale: on this shape {tight[1].describe()})"
            )
            tight_bad = tight_bad or result
        comparisons.append(result)
        if not result.ok and first_bad is None:
            first_bad = result
    reason = first_bad.reason if first_bad else ""
    if ctx.problem.check is None:
        return first_bad is None, first_bad, reason, comparisons
    good, message = problem_check(ctx, record, output)
    nan_bad = next((c for c in comparisons if c.nonfinite), None)
    if not good:
        ours = (
            f"; ctxkernel's comparison: {first_bad.reason}"
            if first_bad is not None
            else "; ctxkernel's own comparison passed"
            + (f" (max_abs={comparisons[0].max_abs:.3g})" if comparisons else "")
        )
        return (
            False,
            first_bad or (comparisons[0] if comparisons else None),
            f"check_implementation: {message}{ours}",
            comparisons,
        )
    if nan_bad is not None:
        return False, nan_bad, nan_bad.reason, comparisons
    if tight_bad is not None:
        return False, tight_bad, f"check_implementation passed, but {tight_bad.reason}", comparisons
    return True, None, "", comparisons


def compare_where_it_lives(
    got: torch.Tensor,
    expected: torch.Tensor,
    tolerance: Tolerance,
    slack: torch.Tensor | None = None,
) -> Comparison:
    """``metrics.compare`` on the reference's GPU when the tensor is large, else on the
    CPU; the CPU again when the GPU has no room for the float64 copies."""
    if expected.is_cuda and expected.numel() >= DEVICE_COMPARE_ELEMENTS:
        try:
            return compare(got, expected, tolerance, on_device=True, slack=slack)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
    return compare(got, expected, tolerance, slack=slack)


def problem_check(ctx: LadderContext, record: CallRecord, output: Any) -> tuple[bool, str]:
    """The problem's own ``check_implementation`` on a pristine copy of the inputs."""
    assert ctx.problem.check is not None
    try:
        verdict = ctx.problem.check(clone(record.inputs.pristine), rebuild(output, ctx.device))
    except Exception as exc:
        return False, printable(f"raised {type(exc).__name__}: {exc}"[:300])
    good, message = (
        (verdict[0], verdict[1]) if isinstance(verdict, tuple) else (not verdict, verdict)
    )
    return bool(good), printable(scrub_paths(str(message or ""))[:300])


def _judged_dtype(got: torch.dtype, expected: torch.dtype) -> torch.dtype:
    """The dtype whose default tolerance fits a comparison: the output's when it is the
    less precise (a float32 output against a float64 reference, which GPU MODE allows)."""
    if got == expected or not (got.is_floating_point and expected.is_floating_point):
        return expected
    return got if torch.finfo(got).eps > torch.finfo(expected).eps else expected
