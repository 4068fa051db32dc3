"""Signal check: whether a problem's check can tell a trivial answer from the right one.

A tolerance loose for the outputs' scale lets a kernel that computes nothing pass.
KernelBench's fp32 ``atol = 1e-4`` lets an output of zeros through on its level-1
Softmax (outputs near 2.5e-6 at dim = 393216), FrobeniusNorm, L2Norm and Min; an output
that barely varies lets its mean through. So on every public shape, before any candidate
runs (in the parent, where the references run), the trivial answers go through the
problem's own check (its tolerance, or a GPU MODE ``check_implementation``):

- ``zeros`` and ``ones``;
- ``identity``: an input of the output's shape, where one has it;
- ``mean``: the reference output's mean everywhere (outputs of more than one element);
- ``other input``: the reference output of another input of the same shape.

Where one passes an output on a shape, that output is judged there by a relative
criterion instead (``relative``): the absolute tolerance scaled to the output's peak,
with floors on cosine similarity and PSNR; the verdict says so. Where a trivial answer
passes even that on every public shape, the check cannot tell it from the right answer
and the problem is refused (``ProblemError``) naming the shape and the answer. A shape
where a trivial answer *is* the answer (a softmax over one element is all ones) is kept
in the verdict's details and costs nothing while another shape tells them apart.

A native problem exempts itself with ``SIGNAL_EXEMPT = "why"``; ``--signal-exempt WHY``
does it for formats that cannot say so. Shapes the candidate never saw (unseen shapes,
stress inputs) get the same trial, but ``other input``, when their reference is computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from ..metrics import CHUNK_ELEMENTS, compare
from .problemspec import Tolerance

if TYPE_CHECKING:
    from .problemspec import Problem

TRIVIAL = ("zeros", "ones", "identity", "mean", "other input")
_WORDS = {
    "zeros": "an output of zeros",
    "ones": "an output of ones",
    "identity": "an input returned as the output",
    "mean": "the output's mean everywhere (a constant)",
    "other input": "the reference output of another input",
}
DEVICE_COMPARE_ELEMENTS = 1 << 22  # from this many elements a GPU reference is compared there


@dataclass(frozen=True)
class Finding:
    """The trivial answers that pass one output of one shape."""

    shape: str  # the shape's label ("an unseen shape" for one the candidate never saw)
    output: int  # which tensor leaf of the output
    outputs: int  # how many tensor leaves the output has
    passed: tuple[str, ...]  # trivial answers the problem's own check lets through
    still: tuple[str, ...]  # ... that the relative criterion lets through as well
    peak: float  # the largest finite |output|: what the relative criterion scales by
    tolerance: Tolerance  # the problem's own, for this output
    # the output moves past the relative criterion when its inputs move by rtol: it is not
    # defined that finely (rounding noise around zero), so nothing is tightened there
    noise: bool = False

    @property
    def where(self) -> str:
        leaf = f" output #{self.output}" if self.outputs > 1 else ""
        return f"{self.shape}{leaf}"

    def describe(self) -> str:
        """``m=2 n=20000: zeros, mean pass atol=0.0001 rtol=0.0001 (outputs at most 7.9e-05)``."""
        if self.noise:
            return (
                f"{self.where}: {', '.join(self.passed)} pass; the outputs (at most "
                f"{self.peak:.2g}) move more than that when the inputs move by "
                f"rtol={self.tolerance.rtol:g}: rounding noise, not an answer"
            )
        return (
            f"{self.where}: {', '.join(self.passed)} pass{'es' if len(self.passed) == 1 else ''} "
            f"atol={self.tolerance.atol:g} rtol={self.tolerance.rtol:g} "
            f"(outputs at most {self.peak:.2g})"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "output": self.output,
            "passed": list(self.passed),
            "still": list(self.still),
            "peak": self.peak,
            "noise": self.noise,
        }


def relative(tolerance: Tolerance, expected: torch.Tensor) -> Tolerance:
    """The relative criterion for an output whose scale the tolerance does not fit:
    ``atol`` scaled by the output's peak (when below 1), a cosine floor of ``1 - (atol +
    rtol)`` and a PSNR floor 6 dB under what ``atol + rtol`` of the peak would give (a
    precision's own floors where it has them). Integer (exact) tolerances stay as they are."""
    if tolerance.atol == 0 and tolerance.rtol == 0:
        return tolerance
    peak = output_peak(expected)
    if peak == 0.0:
        return tolerance  # all zeros: zeros is the answer, nothing to scale by
    spread = tolerance.atol + tolerance.rtol
    return replace(
        tolerance,
        atol=tolerance.atol * min(1.0, peak),
        min_cossim=tolerance.min_cossim
        if tolerance.min_cossim is not None
        else max(0.0, 1.0 - spread),
        min_psnr=tolerance.min_psnr
        if tolerance.min_psnr is not None
        else round(20.0 * math.log10(1.0 / spread) - 6.0),
        precision=f"{tolerance.precision} (relative)",
    )


def output_peak(expected: torch.Tensor) -> float:
    if not (expected.is_floating_point() or expected.is_complex()) or expected.numel() == 0:
        return float(expected.abs().max()) if expected.numel() else 0.0
    peak = 0.0
    flat = expected.detach().reshape(-1)
    for start in range(0, flat.numel(), CHUNK_ELEMENTS):  # a float64 copy a chunk at a time
        values = flat[start : start + CHUNK_ELEMENTS].abs().to(torch.float64)
        finite = values[torch.isfinite(values)]
        if finite.numel():
            peak = max(peak, float(finite.max()))
    return peak


def trivial_answers(
    expected: torch.Tensor,
    inputs: Sequence[torch.Tensor],
    other: torch.Tensor | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """The trivial answers for one output tensor, each of its shape, dtype and device, one
    at a time (at upstream sizes each is gigabytes: none is made before the last is let go)."""
    yield "zeros", torch.zeros_like(expected)
    yield "ones", torch.ones_like(expected)
    same = [t for t in inputs if tuple(t.shape) == tuple(expected.shape)]
    if same:
        with torch.no_grad():
            yield "identity", same[0].detach().to(expected.device, expected.dtype)
    floating = expected.is_floating_point() or expected.is_complex()
    if floating and expected.numel() > 1:
        mean = _finite_mean(expected.detach())
        if mean is not None:
            yield "mean", torch.full_like(expected, mean)
    if other is not None and tuple(other.shape) == tuple(expected.shape):
        yield "other input", other.detach().to(expected.device, expected.dtype)


def _finite_mean(values: torch.Tensor) -> complex | float | None:
    """The mean of the finite elements (every element of a complex tensor); None where
    none is. Past ``CHUNK_ELEMENTS`` summed a chunk at a time in float64 (no mask or copy
    of the whole tensor)."""
    flat = values.reshape(-1)
    if values.is_complex() or flat.numel() <= CHUNK_ELEMENTS:
        finite = flat if values.is_complex() else flat[torch.isfinite(flat)]
        return finite.mean().item() if finite.numel() else None
    total, count = 0.0, 0
    for start in range(0, flat.numel(), CHUNK_ELEMENTS):
        part = flat[start : start + CHUNK_ELEMENTS]
        finite = part[torch.isfinite(part)]
        total += float(finite.sum(dtype=torch.float64))
        count += finite.numel()
    return total / count if count else None


def _ok(got: torch.Tensor, expected: torch.Tensor, tolerance: Tolerance) -> bool:
    on_device = expected.is_cuda and expected.numel() >= DEVICE_COMPARE_ELEMENTS
    return compare(got, expected, tolerance, k_worst=0, on_device=on_device).ok


def _tensor_leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _tensor_leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _tensor_leaves(v)]
    return [value]


def _with_leaf(tree: Any, index: int, value: torch.Tensor) -> Any:
    """``tree`` with its ``index``-th leaf (in ``_tensor_leaves`` order) replaced."""
    counter = [0]

    def walk(node: Any) -> Any:
        if isinstance(node, tuple):
            return tuple(walk(v) for v in node)
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        here = counter[0]
        counter[0] += 1
        return value if here == index else node

    return walk(tree)


def probe(
    problem: Problem,
    label: str,
    pristine: Any,
    reference: Any,
    other: Any = None,
    slots: Sequence[int] = (),
    clone: Callable[[Any], Any] | None = None,
    scale: float = 1.0,
    perturbed: Callable[[], Any] | None = None,
) -> list[Finding]:
    """The trivial answers that pass each output tensor of ``reference`` (computed from
    ``pristine``; ``other``: the reference of another input of the same shape, or None).
    ``scale`` multiplies ``atol`` (the rescaled-inputs trial's). ``perturbed``: the
    reference of the inputs moved by ``rtol`` (called only where an answer passes): where
    even it fails the relative criterion the output is rounding noise, the criterion does
    not apply, and every answer that passed counts as one the check cannot tell apart."""
    inputs = [
        t
        for i, t in enumerate(t for t in _tensor_leaves(pristine) if isinstance(t, torch.Tensor))
        if i not in set(slots)
    ]
    leaves = _tensor_leaves(reference)
    others = _tensor_leaves(other) if other is not None else [None] * len(leaves)
    tensors = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    findings = []
    moved: list[Any] | None = None
    for index in tensors:
        expected: torch.Tensor = leaves[index]
        if expected.numel() == 0:
            continue
        tolerance = problem.tolerance_for(expected.dtype)
        if scale != 1.0:
            tolerance = replace(tolerance, atol=tolerance.atol * scale)
        tight = relative(tolerance, expected)
        twin = others[index] if index < len(others) else None
        passed, still = [], []
        for name, answer in trivial_answers(
            expected, inputs, twin if isinstance(twin, torch.Tensor) else None
        ):
            if problem.check is not None:
                good = _problem_check(problem, pristine, reference, index, answer, clone)
            else:
                good = _ok(answer, expected, tolerance)
            if not good:
                continue
            passed.append(name)
            if _ok(answer, expected, tight):
                still.append(name)
        if not passed:
            continue
        noise = False
        if perturbed is not None and set(passed) - set(still):
            if moved is None:
                moved = _tensor_leaves(perturbed())
            near = moved[index] if index < len(moved) else None
            noise = not (
                isinstance(near, torch.Tensor)
                and near.shape == expected.shape
                and _ok(near, expected, tight)
            )
        findings.append(
            Finding(
                label,
                tensors.index(index),
                len(tensors),
                tuple(passed),
                tuple(passed) if noise else tuple(still),
                output_peak(expected),
                tolerance,
                noise,
            )
        )
    return findings


def _problem_check(
    problem: Problem,
    pristine: Any,
    reference: Any,
    index: int,
    answer: torch.Tensor,
    clone: Callable[[Any], Any] | None,
) -> bool:
    """Whether the problem's own ``check_implementation`` accepts ``answer`` in place of
    the ``index``-th leaf of the output (NaN never passes, as in ``check_output``)."""
    assert problem.check is not None
    if (answer.is_floating_point() or answer.is_complex()) and not bool(
        torch.isfinite(answer).all()
    ):
        return False
    data = clone(pristine) if clone is not None else pristine
    try:
        verdict = problem.check(data, _with_leaf(reference, index, answer))
    except Exception:  # the problem's check raising on a trivial answer: it did not pass
        return False
    good = verdict[0] if isinstance(verdict, tuple) else not verdict
    return bool(good)


def refusal(problem_name: str, findings: Sequence[Finding], shapes: int) -> str | None:
    """Why the problem is refused: a trivial answer that passes an output on every one of
    the ``shapes`` public shapes even by the relative criterion; None when some shape
    tells each one apart."""
    for answer in TRIVIAL:
        for output in sorted({f.output for f in findings}):
            where = [f for f in findings if f.output == output and answer in f.still]
            if len({f.shape for f in where}) < shapes or not where:
                continue
            first = where[0]
            leaf = f" output #{output}" if first.outputs > 1 else " the output"
            how = (
                "and the outputs are rounding noise there (they move more than the "
                "tolerance when the inputs move by rtol)"
                if first.noise
                else "even judged relative to the output's scale"
            )
            return (
                f"{problem_name}: the check cannot tell {_WORDS[answer]} from the right "
                f"answer: it passes{leaf} on every shape, {how} ({first.shape}: outputs at "
                f"most {first.peak:.3g}, atol={first.tolerance.atol:g} "
                f"rtol={first.tolerance.rtol:g}); widen the "
                'inputs or the shapes, or exempt the problem with SIGNAL_EXEMPT = "why" '
                "(--signal-exempt WHY)"
            )
    return None


def declared_exemption(problem: Problem) -> str | None:
    """The problem's ``SIGNAL_EXEMPT`` reason (read by its loader), or None."""
    given = problem.signal_exempt
    return str(given) if given else None


__all__ = [
    "TRIVIAL",
    "Finding",
    "declared_exemption",
    "output_peak",
    "probe",
    "refusal",
    "relative",
    "trivial_answers",
]
