"""Calibrated tolerances (``--calibrate``, ``CALIBRATE``): measured from the reference's own
error against float64, never looser than declared, and strict enough to catch a kernel
that reads its inputs in half precision, which the float32 default lets through."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from ctxkernel.cli import main
from harness.errors import ProblemError
from harness.problems.calibrate import MARGIN, Calibrator, measure
from harness.problems.problem import load_native
from harness.verdict import Verdict

# row means of float32 rows long enough that float32 is accurate to ~1e-9 there, while
# rounding each input to float16 moves a mean by ~1e-6: inside the float32 default
# (atol=rtol=1e-5), far outside the calibrated tolerance
PROBLEM = '''"""Row means of a float32 matrix."""

import torch

SHAPES = [{"rows": 16, "n": 16384}, {"rows": 7, "n": 12000}]
STRESS = False
CALIBRATE = CALIBRATE_VALUE


def generate_input(seed, rows, n, device="cpu"):
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(rows, n, generator=gen, device=device),)


def ref_kernel(inputs):
    (x,) = inputs
    return x.mean(dim=1)
'''

HONEST = """import torch
import triton
import triton.language as tl


@triton.jit
def mean_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0) / n)


def custom_kernel(inputs):
    (x,) = inputs
    x = x.contiguous()
    rows, n = x.shape
    out = torch.empty(rows, device=x.device, dtype=torch.float32)
    mean_kernel[(rows,)](x, out, n, BLOCK=triton.next_power_of_2(n))
    return out
"""
LOAD = "x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)"
# subtly wrong: every input rounded to float16 before the float32 accumulation
HALF_INPUTS = HONEST.replace(LOAD, LOAD + ".to(tl.float16).to(tl.float32)")


def _problem(tmp_path: Path, calibrate: bool = False) -> Path:
    folder = tmp_path / "row_mean"
    folder.mkdir(exist_ok=True)
    (folder / "problem.py").write_text(PROBLEM.replace("CALIBRATE_VALUE", str(calibrate)))
    return folder


def _candidate(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def _correctness(verdict: Verdict) -> object:
    return next(r for r in verdict.rungs if r.name == "correctness")


def test_calibrated_tolerance_lies_between_the_measured_error_and_the_default(
    tmp_path: Path,
) -> None:
    problem = load_native(_problem(tmp_path))
    shape = problem.shapes[0]
    inputs = [problem.generate_input(7000 + k, shape, "cpu") for k in range(16)]
    calibration = measure(problem, shape, "rows=16 n=16384", inputs)
    assert not calibration.skipped and calibration.seeds == 16
    found = calibration.for_output(0)
    assert found is not None and found.elements == 16 * 16
    declared = problem.tolerance_for(torch.float32)
    used = found.applied(declared)
    assert used.calibrated and used.as_dict()["source"] == "calibrated"
    assert found.p99_abs > 0  # float32's error on a 16k-element mean is measurable
    assert found.p99_abs < used.atol < declared.atol
    assert used.atol == pytest.approx(MARGIN * found.p99_abs)
    assert used.rtol <= declared.rtol  # tightening only


def test_calibration_is_skipped_with_a_note_where_the_reference_cannot_run_in_float64(
    tmp_path: Path,
) -> None:
    problem = load_native(_problem(tmp_path))

    def float32_only(data: tuple[torch.Tensor]) -> torch.Tensor:
        x = data[0]
        if x.dtype != torch.float32:
            raise TypeError("expected float32")
        return x.mean(dim=1)

    shape = problem.shapes[1]
    inputs = [problem.generate_input(k, shape, "cpu") for k in range(2)]
    calibration = measure(problem, shape, "rows=7 n=12000", inputs, run=float32_only)
    assert "cannot run in float64" in calibration.skipped
    assert calibration.for_output(0) is None
    calibrator = Calibrator(problem, lambda s, k: inputs[k], seeds=2)
    calibrator._shapes[repr(sorted(shape.items()))] = calibration
    declared = problem.tolerance_for(torch.float32)
    assert calibrator.tolerance(shape, "x", 0, declared) is declared
    assert "calibration skipped" in calibrator.summary()[0]


def test_calibrate_setting_is_read_and_checked(tmp_path: Path) -> None:
    assert load_native(_problem(tmp_path, calibrate=True)).calibrate is True
    assert load_native(_problem(tmp_path, calibrate=False)).calibrate is False
    folder = _problem(tmp_path)
    (folder / "problem.py").write_text(PROBLEM.replace("CALIBRATE_VALUE", '"yes"'))
    with pytest.raises(ProblemError, match="CALIBRATE: expected True or False"):
        load_native(folder)


def test_honest_candidate_passes_the_calibrated_tolerance_and_the_verdict_says_so(
    tmp_path: Path, run_check: Callable[..., Verdict]
) -> None:
    verdict = run_check(_problem(tmp_path), _candidate(tmp_path, "honest", HONEST), calibrate=True)
    rung = _correctness(verdict)
    assert verdict.ok, verdict.feedback()
    assert 0.0 <= rung.metrics["tol_spent"] < 1.0  # type: ignore[attr-defined]
    used = rung.details["tolerance"]  # type: ignore[attr-defined]
    # an unseen shape may be exact in float32 (nothing measured there: declared, said so)
    assert any(u["source"] == "calibrated" for u in used)
    assert all(u["atol"] < 1e-5 for u in used if u["source"] == "calibrated")
    assert rung.details["calibration"][0]["seeds"] == 16  # type: ignore[attr-defined]
    feedback = verdict.feedback()
    assert "tolerance calibrated" in feedback and "of it spent" in feedback
    assert "tol_spent=" in feedback


def test_half_precision_inputs_pass_the_default_but_not_the_calibrated_tolerance(
    tmp_path: Path, run_check: Callable[..., Verdict]
) -> None:
    problem, candidate = _problem(tmp_path), _candidate(tmp_path, "half", HALF_INPUTS)
    # the unseen shapes may shrink the rows to a few elements, where float16 rounding is
    # outside even the default: the two runs differ only in calibration
    declared = run_check(problem, candidate, unseen=False)
    assert declared.ok, declared.feedback()
    rung = _correctness(declared)
    assert rung.details["tolerance"][0]["source"] == "declared"  # type: ignore[attr-defined]
    assert 0.0 < rung.metrics["tol_spent"] < 1.0  # type: ignore[attr-defined]
    calibrated = run_check(problem, candidate, unseen=False, calibrate=True)
    assert not calibrated.ok
    failed = calibrated.failed_rung
    assert failed is not None and failed.name == "correctness"
    assert "calibrated tolerance" in failed.reason
    assert failed.details["tolerance"]["source"] == "calibrated"
    assert failed.metrics["tol_spent"] > 1.0


def test_cli_json_shows_the_tolerance_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(_problem(tmp_path)), str(_candidate(tmp_path, "honest", HONEST))]
    args += ["--calibrate", "--json", "--no-record", "--device", "cpu", "--seeds", "1"]
    with pytest.raises(SystemExit) as exit_info:
        main(["check", *args])
    out, _ = capsys.readouterr()
    assert exit_info.value.code in (0, None)
    doc = json.loads(out)
    rung = next(r for r in doc["rungs"] if r["name"] == "correctness")
    assert any(u["source"] == "calibrated" for u in rung["details"]["tolerance"])
    assert "tol_spent" in rung["metrics"]
