"""The Ray runner on a real local Ray cluster (CPU only), started by the runner itself:
several candidates as Ray tasks, one Ray worker SIGKILLed mid-check and reported, every
verdict correct and kept in this machine's run records.

Needs ``pip install 'ctxkernel[ray]'``; skipped with that reason where Ray is absent.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from harness.runners.ray import RayRunner

from .conftest import CandidateSet, small_options

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'ctxkernel[ray]'")

pytestmark = pytest.mark.slow


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def kill_one_ray_worker(stop: threading.Event, killed: list[str]) -> None:
    """SIGKILL the Ray worker (``ray::check_on_node``) running the first check seen: the
    parent of a ``python -m harness.runners.remote`` process."""
    while not stop.is_set():
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or "harness.runners.remote" not in _cmdline(
                int(entry.name)
            ):
                continue
            parent = _parent(int(entry.name))
            if "check_on_node" in _cmdline(parent) or "default_worker" in _cmdline(parent):
                time.sleep(0.5)  # let the check get going
                os.kill(parent, signal.SIGKILL)
                killed.append(_cmdline(parent))
                return
        time.sleep(0.2)


@pytest.fixture
def ray_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ray keeps a token under ~/.ray; keep it in the test's temp dir
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")


def test_ray_cluster_checks_candidates_and_reports_a_killed_worker(
    vector_add_set: CandidateSet, isolated_home: Path, ray_home: None
) -> None:
    runner = RayRunner(num_cpus=2)
    stop = threading.Event()
    killed: list[str] = []
    options = small_options(device=None)  # the cluster decides: no GPU here, so cpu
    try:
        runner.connect()
        assert runner.gpus_in_cluster() == 0
        killer = threading.Thread(target=kill_one_ray_worker, args=(stop, killed), daemon=True)
        killer.start()
        results = list(runner.run_many(vector_add_set.problem, vector_add_set.candidates, options))
    finally:
        stop.set()
        runner.close()
    assert killed, "no Ray worker was killed"
    verdicts = {c.path.name: v for c, v in results}
    vector_add_set.check(verdicts)
    assert {v.device for v in verdicts.values() if v.failed_rung is None} == {"cpu"}

    requeued = [v for v in verdicts.values() if v.environment["runner"].get("lost")]
    assert len(requeued) == 1
    info = requeued[0].environment["runner"]
    assert info["attempt"] == 2 and "Ray worker died" in info["lost"][0]
    for verdict in verdicts.values():
        assert verdict.environment["runner"]["kind"] == "ray"
        assert verdict.run_dir and Path(verdict.run_dir).is_relative_to(isolated_home / "runs")
        kept = json.loads((Path(verdict.run_dir) / "result.json").read_text())
        assert kept["environment"]["runner"]["kind"] == "ray"
    assert not ray.is_initialized()
