"""The local pool on CPU slots: concurrent checks, a slot killed mid-run, a hung slot,
a slot that cannot start — every verdict present, correct, and kept in the run records."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from harness.runners.pool import PoolEvent, PoolRunner

from .conftest import CandidateSet, small_options

pytestmark = pytest.mark.slow


def test_pool_survives_a_slot_killed_mid_run(
    vector_add_set: CandidateSet, isolated_home: Path
) -> None:
    events: list[PoolEvent] = []
    killed: list[int] = []

    def on_event(event: PoolEvent) -> None:
        events.append(event)
        # SIGKILL the slot half a second into its first honest candidate: the check is
        # then in the middle of starting its worker or compiling
        if event.kind == "started" and not killed and event.job and event.job.index == 0:
            assert event.pid is not None
            killed.append(event.pid)
            threading.Timer(0.5, os.kill, (event.pid, signal.SIGKILL)).start()

    with PoolRunner(jobs=2, on_event=on_event) as pool:
        results = list(
            pool.run_many(vector_add_set.problem, vector_add_set.candidates, small_options())
        )
        tmp = pool.tmp
    assert killed, "no slot was killed"
    verdicts = {c.path.name: v for c, v in results}
    assert len(results) == len(vector_add_set.candidates)
    vector_add_set.check(verdicts)

    rerun = [v for v in verdicts.values() if v.environment["runner"]["attempt"] == 2]
    assert len(rerun) == 1, [v.environment["runner"] for v in verdicts.values()]
    lost = rerun[0].environment["runner"]["lost"]
    assert len(lost) == 1 and "crashed with SIGKILL" in lost[0] and "pool slot" in lost[0]
    kinds = [e.kind for e in events]
    assert "lost" in kinds and "requeued" in kinds
    assert {e.slot for e in events if e.kind == "slot-started"} == {0, 1}
    assert kinds.count("slot-started") == 3  # two slots, one replaced

    # every verdict is in the run records, with the runner that produced it
    for verdict in verdicts.values():
        assert verdict.run_dir and Path(verdict.run_dir).is_relative_to(isolated_home / "runs")
        doc = json.loads((Path(verdict.run_dir) / "result.json").read_text())
        assert doc["environment"]["runner"]["kind"] == "pool"
        assert doc["ok"] is verdict.ok
    assert not tmp.exists()  # the pool's temp dir (and anything left in it) is gone


FAKE_SLOT = """#!{python}
# A stand-in for `python -m harness.runners.slot`: {behaviour}
import os, sys, time
fd = int(sys.argv[sys.argv.index("--fd-out") + 1])
if "{behaviour}" == "dies at start":
    print("fake slot: cannot import torch", file=sys.stderr)
    sys.exit(3)
os.write(fd, b'{{"type": "ready"}}\\n')
sys.stdin.readline()
os.write(fd, b'{{"type": "started", "id": 0}}\\n')
time.sleep(600)
"""


def fake_slot(tmp_path: Path, behaviour: str) -> str:
    path = tmp_path / f"fake-python-{behaviour.replace(' ', '-')}"
    path.write_text(FAKE_SLOT.format(python=sys.executable, behaviour=behaviour))
    path.chmod(0o755)
    return str(path)


def test_a_hung_slot_is_killed_requeued_then_failed_with_the_reason(
    vector_add_set: CandidateSet, tmp_path: Path
) -> None:
    events: list[PoolEvent] = []
    candidate = vector_add_set.candidates[0]
    with PoolRunner(
        jobs=1, job_timeout_s=2.0, python=fake_slot(tmp_path, "hangs"), on_event=events.append
    ) as pool:
        [(_, verdict)] = list(pool.run_many(vector_add_set.problem, [candidate], small_options()))
    assert not verdict.ok and verdict.failed_rung and verdict.failed_rung.name == "runner"
    assert "hung: no verdict after 2 s (killed)" in verdict.reason
    assert "(2 attempts)" in verdict.reason
    info = verdict.environment["runner"]
    assert info["final"] is False and len(info["lost"]) == 2
    assert [e.kind for e in events].count("slot-started") == 2
    assert verdict.run_dir and (Path(verdict.run_dir) / "result.json").is_file()


def test_a_slot_that_cannot_start_fails_the_candidate_with_its_log(
    vector_add_set: CandidateSet, tmp_path: Path
) -> None:
    candidate = vector_add_set.candidates[0]
    with PoolRunner(jobs=1, python=fake_slot(tmp_path, "dies at start")) as pool:
        [(_, verdict)] = list(pool.run_many(vector_add_set.problem, [candidate], small_options()))
    assert not verdict.ok and verdict.failed_rung and verdict.failed_rung.name == "runner"
    assert "could not start" in verdict.reason and "cannot import torch" in verdict.reason
    assert verdict.environment["runner"]["final"] is False
