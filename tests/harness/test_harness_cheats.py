"""The issue's reward-hacking list, one planted cheat per file under ``cheats/``.

File names start with the item number of the issue (``c01`` .. ``c15``; ``c16`` came later); each file's
header names the problem, the options (``policy_scan=false`` switches the static filter
to warnings so the runtime defence is what catches it) and the expected rung and reason.
GPU-only cheats (side streams, illegal memory access, recycled CUDA memory) are in
``test_harness_gpu.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cheatspec import REPO, Expectation, problem_path, read_expectation
from conftest import VerdictPool, fast_options

from harness.runner import LocalRunner, check
from harness.verdict import Verdict

CHEATS = sorted((Path(__file__).resolve().parent / "cheats").glob("c*.py"))
ITEMS = {int(p.name[1:3]) for p in CHEATS}


def _run(expect: Expectation) -> Verdict:
    assert expect.problem
    overrides = dict(expect.options)
    if overrides.get("record"):  # a record of its own, never in the user's runs folder
        overrides["runs_dir"] = Path(tempfile.mkdtemp(prefix="ctxkernel-cheat-records-"))
    options = fast_options(expect.problem, **overrides)
    return check(problem_path(expect.problem), expect.path, options, runner=LocalRunner())


@pytest.fixture(scope="module")
def cheat_verdicts(verdict_pool: VerdictPool) -> Iterator[VerdictPool]:
    with pytest.MonkeyPatch.context() as mp:
        # a secret in the parent's environment must not reach any worker (c15_env_scrubbed)
        mp.setenv("FAKE_SECRET_API_KEY", "must-not-reach-the-worker")
        _remove_plants()
        for cheat in CHEATS:
            expect = read_expectation(cheat)
            verdict_pool.submit(cheat.name, lambda e=expect: _run(e))
        yield verdict_pool
        verdict_pool.wait()
        _remove_plants()


def test_every_cpu_item_of_the_issue_has_a_planted_cheat() -> None:
    # 1-15: the issue's list; 16: work left running while the reference is timed
    assert set(range(1, 17)) == ITEMS, sorted(set(range(1, 17)) ^ ITEMS)


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda p: p.stem)
def test_cheat_is_rejected_with_a_named_reason(cheat: Path, cheat_verdicts: VerdictPool) -> None:
    if cheat == LEAVE_STATE:
        from harness.process import sandbox

        if not sandbox.isolation().private_tmp:
            pytest.skip("no private temp folders in this sandbox mode: /tmp is shared")
    expect = read_expectation(cheat)
    verdict = cheat_verdicts.get(cheat.name, lambda: _run(expect))
    failed = verdict.failed_rung
    if expect.rung == "none":
        assert failed is None, verdict.feedback()
        return
    assert failed is not None, f"{cheat.name} passed: {verdict.lines()}"
    assert failed.name in expect.rungs, failed.reason
    assert expect.named_in(failed.reason), failed.reason


def test_runtime_patches_are_all_named(cheat_verdicts: VerdictPool) -> None:
    cheat = Path(__file__).resolve().parent / "cheats" / "c08_runtime_patch.py"
    verdict = cheat_verdicts.get(cheat.name, lambda: _run(read_expectation(cheat)))
    joined = "\n".join(verdict.integrity)
    assert "replaced torch.allclose" in joined
    assert "replaced time.perf_counter" in joined


def test_crash_feedback_names_the_candidate_line(cheat_verdicts: VerdictPool) -> None:
    cheat = Path(__file__).resolve().parent / "cheats" / "c15_segfault.py"
    verdict = cheat_verdicts.get(cheat.name, lambda: _run(read_expectation(cheat)))
    feedback = verdict.feedback()
    assert "crashed with SIGSEGV" in feedback
    assert "faulthandler._sigsegv()" in feedback, feedback


def test_a_sparse_log_is_stopped_at_the_disk_cap_and_its_record_kept(
    cheat_verdicts: VerdictPool,
) -> None:
    """The worker ``ftruncate``s its own stdout and stderr logs to 4 TiB of holes: a log
    weighs its apparent size, so the worker is killed naming the disk cap, and the record
    (asked for in the cheat's header) is written, each log trimmed to its last MiB, read
    without ever reading more."""
    from harness.records import LOG_LIMIT

    cheat = Path(__file__).resolve().parent / "cheats" / "c15_sparse_log.py"
    expect = read_expectation(cheat)
    assert expect.options.get("record") is True
    verdict = cheat_verdicts.get(cheat.name, lambda: _run(expect))
    assert verdict.run_dir, verdict.feedback()
    record = Path(verdict.run_dir)
    try:
        failed = verdict.failed_rung
        assert failed is not None and "disk cap" in failed.reason, verdict.feedback()
        assert (record / "result.json").is_file() and (record / "feedback.txt").is_file()
        logs = sorted(record.glob("*.log"))
        assert logs, sorted(p.name for p in record.iterdir())
        for log in logs:
            assert log.stat().st_size <= LOG_LIMIT + 64, (log.name, log.stat().st_size)
    finally:
        shutil.rmtree(record.parents[1], ignore_errors=True)


def test_the_printed_ladder_and_feedback_hold_no_raw_control_character(
    cheat_verdicts: VerdictPool,
) -> None:
    """A candidate's exception text made of terminal control sequences (``ESC E``, CSI:
    a fake passing ladder drawn over the real one) is printed with every control character
    written out (``\\x1b``), by the CLI's ladder, ``--feedback`` and ``feedback()``."""
    cheat = Path(__file__).resolve().parent / "cheats" / "c12_terminal_escape.py"
    verdict = cheat_verdicts.get(cheat.name, lambda: _run(read_expectation(cheat)))
    assert verdict.failed_rung is not None and verdict.failed_rung.name == "run"
    for text in ("\n".join(verdict.lines()), verdict.feedback()):
        assert "\x1b" not in text and "\x9b" not in text, repr(text)
        assert "\\x1bE" in text, text
        assert not [c for c in text if ord(c) < 32 and c not in "\n\t"], repr(text)
    problem = problem_path("vector_add")
    env = {k: v for k, v in os.environ.items() if k != "CTXKERNEL_PLANTED"}
    for extra in ([], ["--feedback"]):
        done = subprocess.run(
            [sys.executable, "-m", "harness", "check", str(problem), str(cheat), "--no-record",
             "--device", "cpu", "--shapes", "n=1000", *extra],
            capture_output=True, text=True, timeout=600, env=env, cwd=REPO,
        )  # fmt: skip
        assert done.returncode == 1, done.stderr[-2000:]
        assert "\x1b" not in done.stdout + done.stderr, repr(done.stdout)
        assert "\\x1bE" in done.stdout, done.stdout


LEAVE_STATE = Path(__file__).resolve().parent / "cheats" / "c15_leave_state_behind.py"
PLANTS = (
    "/dev/shm/ctxkernel-cheat-plant.bin",
    "/tmp/ctxkernel-cheat-plant.bin",
    "/var/tmp/ctxkernel-cheat-plant.bin",
)  # the cheat's


def _remove_plants() -> None:
    for path in PLANTS:
        with contextlib.suppress(OSError):
            os.unlink(path)


@pytest.fixture
def private_tmp() -> Iterator[None]:
    from harness.process import sandbox

    if not sandbox.isolation().private_tmp:
        pytest.skip("no private temp folders in this sandbox mode: /tmp is shared")
    _remove_plants()
    yield
    _remove_plants()


def test_the_state_planting_cheat_finds_a_predecessors_plant(tmp_path: Path) -> None:
    """The cheat can fail: a foreign token in a shared temp file is found."""
    _remove_plants()
    code = (
        "import torch, runpy\n"
        f"torch.from_file({PLANTS[0]!r}, shared=True, size=1, dtype=torch.float32)[0] = 7.0\n"
        f"print(runpy.run_path({str(LEAVE_STATE)!r})['FOUND'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CTXKERNEL_PLANTED"}
    env["TRITON_INTERPRET"] = "1"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        _remove_plants()
    assert out.returncode == 0, out.stderr[-2000:]
    assert PLANTS[0] in out.stdout


def test_state_one_candidate_leaves_does_not_reach_the_next(private_tmp: None) -> None:
    """Two checks in a row in one long-lived parent (the second worker forked from the
    same warm template): the first one's plants (temp files, sys.modules, builtins,
    os.environ) are not seen by the second, and none is left on the machine."""
    expect = read_expectation(LEAVE_STATE)
    verdicts = [_run(expect), _run(expect)]
    for verdict in verdicts:
        assert verdict.failed_rung is None, verdict.feedback()
    assert verdicts[1].environment["workers"]["forked"] >= 1, verdicts[1].environment
    assert not [p for p in PLANTS if os.path.exists(p)]
    # where the seconds went, rung by rung: every rung that ran is timed, within the wall
    spent = verdicts[1].environment["rung_s"]
    ran = [r.name for r in verdicts[1].rungs if r.ok is not None]
    assert set(ran) <= set(spent) and sum(spent.values()) <= verdicts[1].wall_s + 0.01
