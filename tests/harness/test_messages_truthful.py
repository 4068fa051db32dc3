"""The correctness rung says why trials disagree, truthfully.

Each trial has its own seeded inputs. A deterministic kernel that is wrong only where an
input exceeds a threshold, which one trial's seed reached, was reported as
"nondeterministic: trial 1/3 failed, 2 and 3 passed": the fault was in the inputs, not
in the kernel's repeatability. The rung now calls the failing trial's input again: the
same output is "fails on some inputs" (naming the seed), a different one is
"nondeterministic". Both planted candidates are in ``cheats/``.
"""

from __future__ import annotations

from pathlib import Path

from cheatspec import problem_path, read_expectation
from conftest import fast_options

from harness.problems.problem import load_problem
from harness.rungs.inputs import mix_seed
from harness.runner import LocalRunner, check
from harness.verdict import Verdict

CHEATS = Path(__file__).resolve().parent / "cheats"


def _verdict(name: str) -> tuple[Verdict, dict[str, object]]:
    expect = read_expectation(CHEATS / name)
    assert expect.problem
    options = fast_options(expect.problem, **expect.options)
    verdict = check(problem_path(expect.problem), expect.path, options, runner=LocalRunner())
    return verdict, expect.options


def test_a_kernel_wrong_on_some_seeds_is_not_called_nondeterministic() -> None:
    verdict, options = _verdict("c14_wrong_on_some_inputs.py")
    failed = verdict.failed_rung
    assert failed is not None and failed.name == "correctness", verdict.lines()
    assert failed.reason.startswith("fails on some inputs: trial 1/3 (seed "), failed.reason
    assert "nondeterministic" not in failed.reason
    # the seed named is the one trial 1's inputs were generated from
    public = load_problem(problem_path("vector_add")).public_seed(0)
    seed = mix_seed(public, 0, int(str(options["secret"])))
    assert f"(seed {seed}) failed, 2 and 3 passed" in failed.reason
    assert failed.details["seeds"] == [seed]
    assert failed.details["same_input_again"] == "same output"


def test_a_kernel_that_changes_its_answer_for_the_same_input_is_nondeterministic() -> None:
    verdict, _ = _verdict("c14_race.py")
    failed = verdict.failed_rung
    assert failed is not None and failed.name == "correctness", verdict.lines()
    assert failed.reason.startswith("nondeterministic: the same input (trial "), failed.reason
    assert "fails on some inputs" not in failed.reason
    assert failed.details["same_input_again"] == "different output"
