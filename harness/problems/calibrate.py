"""Calibrated tolerances: a problem's tolerance measured from its reference's own error.

A declared tolerance (``Tolerance.for_dtype`` defaults, or ``TOLERANCE``) is a guess made
for every problem of a dtype; a float32 mean over 16k elements is accurate to about 1e-9
while the float32 default allows 1e-5, room enough for a kernel that reads its inputs in
half precision. With ``--calibrate`` (or ``CALIBRATE = True`` in a native problem) the
parent runs the reference on ``CALIBRATION_SEEDS`` secret-seeded inputs per shape twice:
as given, and with every floating-point input cast to float64 (complex to complex128).
Per output tensor, the reference's error against its float64 self gives

- ``atol = MARGIN x p99 |ref - ref64|``, never under ``FLOOR_ULPS`` ulps of the output
  dtype at the median ``|ref64|`` (an exact reference still allows a rounding);
- ``rtol = MARGIN x p99 (|ref - ref64| / |ref64|)`` over elements whose ``|ref64|`` is not
  tiny (above ``TINY`` of the output's peak), never under ``FLOOR_ULPS`` ulps.

The rule is tightening only: each calibrated value is the smaller of the measured one
and the declared one, so calibration can never pass a kernel the declared tolerance
would fail. A candidate is compared with the reference, not with float64, so its own
rounding and the reference's add up: the margin of 4 covers both (about 10 standard
deviations of a Gaussian error for p99) and the max over elements a larger tensor has.
PSNR and cosine floors stay as declared.

Where the reference cannot run in float64 (it raises, returns another structure, or
returns nothing floating point), or its float64 run gives the very same output (it casts
its inputs to a fixed dtype itself, so nothing was measured), calibration is skipped for that shape with a note and
the declared tolerance is used. Results are cached per shape for one check
(``Calibrator``), so the unseen shapes and repeated trials cost no more reference runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from .precision import reference_precision
from .problemspec import Problem, Tolerance

CALIBRATION_SEEDS = 16  # inputs per shape the reference is measured on
MARGIN = 4.0  # calibrated tolerance = MARGIN x the reference's p99 error against float64
PERCENTILE = 0.99
TINY = 1e-3  # |ref64| below this share of the output's peak: left out of the relative error
FLOOR_ULPS = 2.0  # a calibrated atol/rtol never goes under this many ulps of the output dtype


@dataclass(frozen=True)
class OutputCalibration:
    """One output tensor's measured error and the tolerance derived from it."""

    output: int  # position among the reference's tensor leaves
    dtype: str
    p99_abs: float
    p99_rel: float
    atol: float  # MARGIN x p99_abs, floored (before the declared cap)
    rtol: float
    elements: int

    def applied(self, declared: Tolerance) -> Tolerance:
        """The tolerance used: each value the smaller of calibrated and declared."""
        return replace(
            declared,
            atol=min(declared.atol, self.atol),
            rtol=min(declared.rtol, self.rtol),
            calibrated=True,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "output": self.output,
            "dtype": self.dtype,
            "p99_abs": self.p99_abs,
            "p99_rel": self.p99_rel,
            "measured_atol": self.atol,
            "measured_rtol": self.rtol,
            "elements": self.elements,
        }


@dataclass
class ShapeCalibration:
    """A shape's calibration: per output tensor (None where not floating point), or a note
    saying why it was skipped."""

    label: str
    outputs: list[OutputCalibration | None] = field(default_factory=list)
    seeds: int = 0
    skipped: str = ""

    def for_output(self, position: int) -> OutputCalibration | None:
        if self.skipped or position >= len(self.outputs):
            return None
        return self.outputs[position]


def to_float64(value: Any) -> Any:
    """``value`` with every floating-point tensor as float64 (complex as complex128)."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return value.to(torch.complex128)
        return value.to(torch.float64) if value.is_floating_point() else value
    if isinstance(value, tuple):
        return tuple(to_float64(v) for v in value)
    if isinstance(value, list):
        return [to_float64(v) for v in value]
    if isinstance(value, dict):
        return {k: to_float64(v) for k, v in value.items()}
    return value


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    return [value]


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in _leaves(value) if isinstance(t, torch.Tensor)]


def _real64(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.to("cpu", torch.float64).reshape(-1)


def _quantile(values: torch.Tensor) -> float:
    if not values.numel():
        return 0.0
    # torch.quantile refuses very large inputs; kthvalue does not
    k = max(1, min(values.numel(), math.ceil(PERCENTILE * values.numel())))
    return float(values.kthvalue(k).values)


def _eps(dtype: torch.dtype) -> float:
    if dtype.is_complex:
        dtype = torch.float64 if dtype == torch.complex128 else torch.float32
    return float(torch.finfo(dtype).eps)


def measure(
    problem: Problem,
    shape: dict[str, Any],
    label: str,
    inputs: list[Any],
    run: Callable[[Any], Any] | None = None,
) -> ShapeCalibration:
    """Calibrate one shape from ``inputs`` (one pristine input per seed). ``run(data)``
    computes the reference (default: ``problem.ref_output`` with TF32 off, no grad)."""

    def reference(data: Any) -> Any:
        with reference_precision(), torch.no_grad():
            return problem.ref_output(data, shape)

    run = run or reference
    result = ShapeCalibration(label)
    abs_err: dict[int, list[torch.Tensor]] = {}
    rel_err: dict[int, list[torch.Tensor]] = {}
    magnitude: dict[int, list[torch.Tensor]] = {}
    dtypes: dict[int, torch.dtype] = {}
    positions = 0
    for data in inputs:
        got = _tensors(run(_clone(data)))
        try:
            wide = _tensors(run(to_float64(_clone(data))))
        except Exception as exc:  # any failure of the reference in float64 means: skip, say why
            result.skipped = (
                f"the reference cannot run in float64 on {label} "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
            )
            return result
        if len(wide) != len(got) or any(
            a.shape != b.shape for a, b in zip(got, wide, strict=False)
        ):
            result.skipped = f"the reference returns another structure in float64 on {label}"
            return result
        positions = len(got)
        for i, (low, high) in enumerate(zip(got, wide, strict=True)):
            if not (low.is_floating_point() or low.is_complex()):
                continue
            lo, hi = _real64(low), _real64(high)
            finite = torch.isfinite(lo) & torch.isfinite(hi)
            lo, hi = lo[finite], hi[finite]
            if not lo.numel():
                continue
            dtypes[i] = low.dtype
            diff = (lo - hi).abs()
            big = hi.abs() > TINY * float(hi.abs().max())
            abs_err.setdefault(i, []).append(diff)
            rel_err.setdefault(i, []).append(diff[big] / hi[big].abs())
            magnitude.setdefault(i, []).append(hi.abs())
    result.seeds = len(inputs)
    if not dtypes:
        result.skipped = f"the reference has no floating-point output on {label}"
        return result
    for i in range(positions):
        if i not in dtypes:
            result.outputs.append(None)
            continue
        diffs, rels = torch.cat(abs_err[i]), torch.cat(rel_err[i])
        if not bool((diffs > 0).any()):  # identical in float64: nothing was measured
            result.outputs.append(None)
            continue
        eps = _eps(dtypes[i])
        median = float(torch.cat(magnitude[i]).median())
        p99_abs, p99_rel = _quantile(diffs), _quantile(rels)
        result.outputs.append(
            OutputCalibration(
                output=i,
                dtype=str(dtypes[i]).replace("torch.", ""),
                p99_abs=p99_abs,
                p99_rel=p99_rel,
                atol=max(MARGIN * p99_abs, FLOOR_ULPS * eps * median, 1e-300),
                rtol=max(MARGIN * p99_rel, FLOOR_ULPS * eps),
                elements=int(diffs.numel()),
            )
        )
    if all(o is None for o in result.outputs):
        result.skipped = (
            f"the reference gave bit-identical outputs in float64 on {label} (it casts its "
            "inputs itself, or is exact): nothing measured"
        )
    return result


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


class Calibrator:
    """One check's calibrations, by shape: measured once, on first use."""

    def __init__(
        self,
        problem: Problem,
        make_inputs: Callable[[dict[str, Any], int], Any],
        seeds: int = CALIBRATION_SEEDS,
    ) -> None:
        self.problem = problem
        self.make_inputs = make_inputs  # (shape, k) -> pristine inputs of the k-th seed
        self.seeds = seeds
        self._shapes: dict[str, ShapeCalibration] = {}

    def shape(self, shape: dict[str, Any], label: str) -> ShapeCalibration:
        key = repr(sorted(shape.items()))
        if key not in self._shapes:
            inputs = [self.make_inputs(shape, k) for k in range(self.seeds)]
            self._shapes[key] = measure(self.problem, shape, label, inputs)
        return self._shapes[key]

    def tolerance(
        self, shape: dict[str, Any], label: str, position: int, declared: Tolerance
    ) -> Tolerance:
        """The tolerance for output tensor ``position`` on ``shape``: calibrated (never
        looser than ``declared``), or ``declared`` where calibration was skipped."""
        found = self.shape(shape, label).for_output(position)
        return declared if found is None else found.applied(declared)

    def summary(self) -> tuple[str, list[dict[str, Any]]]:
        """The verdict's note (what was calibrated, what was skipped) and the details."""
        details: list[dict[str, Any]] = []
        skipped: list[str] = []
        for calibration in self._shapes.values():
            if calibration.skipped:
                skipped.append(calibration.skipped)
                details.append({"shape": calibration.label, "skipped": calibration.skipped})
                continue
            details.append(
                {
                    "shape": calibration.label,
                    "seeds": calibration.seeds,
                    "outputs": [o.as_dict() for o in calibration.outputs if o is not None],
                }
            )
        note = ""
        if skipped:
            note = f"calibration skipped, declared tolerance used: {skipped[0]}"
            if len(skipped) > 1:
                note += f" (+{len(skipped) - 1} more)"
        return note, details
