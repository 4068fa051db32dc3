"""Each ``examples/*/bad/*.py`` fails at the rung its first line names, for the reason it names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cheatspec import EXAMPLES, read_expectation
from conftest import VerdictPool

from harness.runner import LocalRunner, RunOptions, check
from harness.verdict import Verdict

BAD = sorted(EXAMPLES.glob("*/bad/*.py"))


def _run(candidate: Path) -> Verdict:
    options = RunOptions(device="cpu", trials=1, burst=2, record=False)
    return check(candidate.parent.parent, candidate, options, runner=LocalRunner())


@pytest.fixture(scope="module")
def bad_verdicts(verdict_pool: VerdictPool) -> Iterator[VerdictPool]:
    for candidate in BAD:
        verdict_pool.submit(str(candidate), lambda c=candidate: _run(c))
    yield verdict_pool


def test_every_example_has_bad_candidates() -> None:
    for problem in ("vector_add", "softmax", "rmsnorm", "matmul_bf16"):
        assert list((EXAMPLES / problem / "bad").glob("*.py")), problem


@pytest.mark.parametrize("candidate", BAD, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_bad_candidate_fails_where_it_says(candidate: Path, bad_verdicts: VerdictPool) -> None:
    first = candidate.read_text().splitlines()[0]
    assert first.startswith("# expect: "), "the first line names the rung and the reason"
    expect = read_expectation(candidate)
    verdict = bad_verdicts.get(str(candidate), lambda: _run(candidate))
    failed = verdict.failed_rung
    assert failed is not None, f"{candidate.name} passed"
    assert failed.name in expect.rungs, failed.reason
    assert expect.named_in(failed.reason), failed.reason


def test_feedback_names_the_worst_mismatch(bad_verdicts: VerdictPool) -> None:
    candidate = EXAMPLES / "rmsnorm" / "bad" / "wrong_mean.py"
    verdict = bad_verdicts.get(str(candidate), lambda: _run(candidate))
    text = verdict.feedback()
    lines = text.splitlines()
    assert len(lines) < 40
    assert lines[0].startswith("FAILED at rung 'correctness'")
    assert "worst mismatches (index: expected vs got):" in text
    worst = next(r for r in verdict.rungs if r.name == "correctness").details["worst"][0]
    index = ", ".join(str(i) for i in worst["index"])
    assert f"[{index}]: expected {worst['expected']:.6g} got {worst['got']:.6g}" in text


def test_feedback_for_a_kernel_error_shows_the_kernel_line(bad_verdicts: VerdictPool) -> None:
    candidate = EXAMPLES / "softmax" / "bad" / "kernel_typo.py"
    verdict = bad_verdicts.get(str(candidate), lambda: _run(candidate))
    text = verdict.feedback()
    assert len(text.splitlines()) < 40
    assert "tl.lod(" in text
    assert "/tmp" not in text and "ctxkernel-check-" not in text
