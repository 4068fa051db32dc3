"""Fixtures for the runner tests: small CPU options and a mixed set of candidates.

Every check here is a real one (a worker process, the Triton interpreter on CPU), kept
to one small shape and two trials so a pool of two slots gets through a batch quickly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.problems.candidate import Candidate, load_candidate
from harness.problems.problem import Problem, load_problem
from harness.runner import RunOptions
from harness.verdict import Verdict

REPO = Path(__file__).resolve().parents[2]
VECTOR_ADD = REPO / "examples" / "vector_add"
SOLUTION = VECTOR_ADD / "solution_triton.py"
SMALL = [{"n": 1000}, {"n": 17}]


def small_options(**overrides: object) -> RunOptions:
    values: dict[str, object] = {
        "device": "cpu",
        "trials": 2,
        "burst": 3,
        "timeout_s": 90.0,
        "shapes": list(SMALL),
    }
    values.update(overrides)
    return RunOptions(**values)  # type: ignore[arg-type]


@dataclass
class CandidateSet:
    """Candidates and the rung each must fail at (None: must pass)."""

    problem: Problem
    candidates: list[Candidate]
    expected: dict[str, str | None]  # candidate file name -> failing rung

    def check(self, verdicts: dict[str, Verdict]) -> None:
        assert set(verdicts) == set(self.expected), verdicts.keys()
        for name, want in self.expected.items():
            verdict = verdicts[name]
            got = verdict.failed_rung.name if verdict.failed_rung else None
            assert got == want, f"{name}: expected {want or 'a pass'}, got {got}: {verdict.reason}"


def copy_of_solution(directory: Path, index: int) -> Path:
    """The honest solution under another name, with distinct content (a batch checks
    identical content once)."""
    path = directory / f"honest_{index}.py"
    path.write_text(SOLUTION.read_text() + f"\n# copy {index}\n")
    return path


@pytest.fixture
def vector_add_set(tmp_path: Path) -> CandidateSet:
    problem = load_problem(VECTOR_ADD)
    paths = {
        copy_of_solution(tmp_path, 1): None,
        copy_of_solution(tmp_path, 2): None,
        VECTOR_ADD / "bad" / "off_by_one.py": "correctness",
        VECTOR_ADD / "bad" / "torch_add.py": "pre-checks",
    }
    candidates = [load_candidate(p, problem) for p in paths]
    return CandidateSet(problem, candidates, {p.name: rung for p, rung in paths.items()})
