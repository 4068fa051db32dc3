"""Batches and the command line: the manifest, resuming an interrupted batch without
re-checking finished candidates, runner specs, options on the wire, job bundles."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness.problems.candidate import Candidate, load_candidate
from harness.problems.problem import Problem, load_problem
from harness.runner import RunOptions
from harness.runners import RunnerError, ThreadedRunner, get_runner
from harness.runners.base import (
    Job,
    failure_verdict,
    options_from_wire,
    options_to_wire,
    runner_info,
)
from harness.runners.batch import Batch, run_batch
from harness.runners.bundle import pack_job
from harness.runners.pool import PoolRunner
from harness.runners.ray import RayRunner
from harness.runners.ssh import SshRunner
from harness.verdict import RungResult, Verdict

from .conftest import REPO, SOLUTION, VECTOR_ADD, copy_of_solution, small_options

# -- runner specs ---------------------------------------------------------------------------


def test_runner_specs_parse() -> None:
    assert isinstance(get_runner("local"), ThreadedRunner)
    assert isinstance(get_runner(None), ThreadedRunner)
    pool = get_runner("pool:?gpus=0,1&jobs=3")
    assert isinstance(pool, PoolRunner)
    assert pool.slot_plan("cuda") == ["0", "1", "0"] and pool.slot_plan("cpu") == [None] * 3
    assert get_runner("pool", jobs=2).slot_plan("cpu") == [None, None]  # type: ignore[attr-defined]

    ssh = get_runner("ssh://alice@gpu-box:2222?python=/opt/venv/bin/python&jobs=2&gpus=0,1")
    assert isinstance(ssh, SshRunner)
    target = ssh.target
    assert (target.user, target.host, target.port, target.jobs) == ("alice", "gpu-box", 2222, 2)
    assert target.python == "/opt/venv/bin/python" and target.gpus == ["0", "1"]
    command = target.ssh_command("true")
    assert "BatchMode=yes" in command and "StrictHostKeyChecking=yes" in command
    assert command[-2:] == ["gpu-box", "sh -c true"] and "-p" in command and "alice" in command

    assert RayRunner.from_spec("ray").address is None
    assert RayRunner.from_spec("ray://head:10001").address == "ray://head:10001"
    assert RayRunner.from_spec("ray:10.0.0.1:6379?num_cpus=4").address == "10.0.0.1:6379"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("carrier-pigeon", "unknown runner"),
        ("ssh://alice:hunter2@gpu-box", "no password in the spec"),
        ("ssh://gpu-box?colour=blue", "unknown option"),
        ("ssh://gpu-box?known_hosts=/no/such/file", "known_hosts file not found"),
        ("ssh://-oProxyCommand=x", "not a host name"),
        ("ssh://gpu-box?harness=maybe", "harness=ship or harness=installed"),
        ("pool:?slots=3", "unknown option"),
        ("ray:?colour=blue", "unknown option"),
    ],
)
def test_bad_runner_specs_are_usage_errors(spec: str, words: str) -> None:
    with pytest.raises(RunnerError, match=words):
        get_runner(spec)


# -- options on the wire, job bundles -------------------------------------------------------


def test_options_travel_intact() -> None:
    options = RunOptions(
        device="cuda",
        trials=5,
        shapes=[{"n": 3}],
        runs_dir=Path("somewhere"),
        allow_programs=("nvcc",),
    )
    back = options_from_wire(json.loads(json.dumps(options_to_wire(options))))
    assert back == options
    changed = options_to_wire(options, changed_only=True, drop=("runs_dir",))
    assert changed == {
        "device": "cuda",
        "trials": 5,
        "shapes": [{"n": 3}],
        "allow_programs": ["nvcc"],
    }
    with pytest.raises(RunnerError, match="does not know the option"):
        options_from_wire({"trials": 2, "from_the_future": True})


def test_a_job_bundle_holds_the_problem_candidate_options_and_harness() -> None:
    problem = load_problem(VECTOR_ADD)
    candidate = load_candidate(SOLUTION, problem)
    data = pack_job(problem, candidate, small_options(runs_dir=Path("/elsewhere")))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
        job = json.loads(tar.extractfile("job/job.json").read())  # type: ignore[union-attr]
    assert {"job/problem/vector_add/problem.py", "job/candidate/solution_triton.py"} <= names
    assert "lib/harness/runner.py" in names and "lib/harness/runners/remote.py" in names
    assert not any("/bad/" in n for n in names)  # subdirectories are not shipped
    assert job["problem"] == "problem/vector_add" and job["sha"] == candidate.sha
    assert "runs_dir" not in job["options"] and job["options"]["device"] == "cpu"
    slim = pack_job(problem, candidate, small_options(), ship_harness=False)
    with tarfile.open(fileobj=io.BytesIO(slim)) as tar:
        assert not any(n.startswith("lib/") for n in tar.getnames())


# -- the manifest, with a scripted runner ----------------------------------------------------


class ScriptedRunner:
    """Passes every candidate whose source does not contain 'LOSE'; records what it ran."""

    spec = "scripted"

    def __init__(self) -> None:
        self.ran: list[str] = []

    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict:
        raise NotImplementedError

    def run_many(
        self, problem: Problem, candidates: Sequence[Candidate], options: RunOptions
    ) -> Iterator[tuple[Candidate, Verdict]]:
        for i, candidate in enumerate(candidates):
            self.ran.append(candidate.path.name)
            if "LOSE" in candidate.source:
                info = runner_info("scripted", Job(i, candidate))
                yield candidate, failure_verdict(problem, candidate, options, "node lost", info)
            else:
                rung = RungResult("correctness", True)
                yield (
                    candidate,
                    Verdict(
                        True,
                        problem.name,
                        "native",
                        str(candidate.path),
                        "triton",
                        "cpu",
                        True,
                        [rung],
                    ),
                )

    def close(self) -> None:
        pass


def test_manifest_resume_skips_finished_and_reruns_lost(
    tmp_path: Path, isolated_home: Path
) -> None:
    problem = load_problem(VECTOR_ADD)
    paths = [copy_of_solution(tmp_path, i) for i in range(3)]
    lost = tmp_path / "lost.py"
    lost.write_text(SOLUTION.read_text() + "\n# LOSE\n")
    twin = tmp_path / "twin.py"
    twin.write_text(paths[0].read_text())
    candidates = [load_candidate(p, problem) for p in [*paths, lost, twin]]
    options = small_options()

    batch = Batch.create(problem, candidates, options, "scripted")
    first = ScriptedRunner()
    items = run_batch(problem, candidates, options, first, batch)
    got = [next(items) for _ in range(3)]  # the controller is interrupted after three verdicts
    items.close()
    assert [i.candidate.path.name for i in got] == ["honest_0.py", "twin.py", "honest_1.py"]
    assert first.ran == ["honest_0.py", "honest_1.py"]  # identical content is checked once

    again = Batch.open(batch.id, problem)
    assert set(again.done) == {candidates[0].sha, candidates[1].sha}
    second = ScriptedRunner()
    resumed = list(run_batch(problem, candidates, options, second, again))
    assert second.ran == ["honest_2.py", "lost.py"]
    assert sorted(i.candidate.path.name for i in resumed if i.resumed) == [
        "honest_0.py",
        "honest_1.py",
        "twin.py",
    ]
    assert len(resumed) == 5

    # a verdict made by the runner (the check was lost) is not final: it runs again
    third = ScriptedRunner()
    list(run_batch(problem, candidates, options, third, Batch.open(str(batch.path), problem)))
    assert third.ran == ["lost.py"]

    with pytest.raises(Exception, match="options differ"):
        Batch.open(batch.id, problem).check_compatible(problem, small_options(trials=4))


# -- the command line, end to end ------------------------------------------------------------


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    from ctxkernel.cli import main

    for args in (
        [str(VECTOR_ADD)],
        [str(VECTOR_ADD), str(SOLUTION), "--runner", "carrier-pigeon"],
        [str(VECTOR_ADD), "--resume", "no-such-batch"],
        [str(VECTOR_ADD), str(SOLUTION), "--jobs", "0"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["check", *args])
        assert exit_info.value.code == 2, args
        _, err = capsys.readouterr()
        assert err.strip() and "Traceback" not in err


@pytest.mark.slow
def test_interrupted_batch_resumes_without_rechecking(tmp_path: Path, isolated_home: Path) -> None:
    good = [copy_of_solution(tmp_path, i) for i in range(2)]
    bad = VECTOR_ADD / "bad" / "off_by_one.py"
    common = ["--device", "cpu", "--shapes", "n=1000;n=17", "--seeds", "2", "--json"]
    cmd = [sys.executable, "-m", "harness", "check", str(VECTOR_ADD), *map(str, [*good, bad])]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [*cmd, "--jobs", "1", *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        # a test run started in the background (`make test &`) inherits SIGINT ignored,
        # and Python then never raises KeyboardInterrupt: give the child the default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the first verdict is in: interrupt
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (
        f"stderr: {err!r}; stdout after the first verdict: {rest[-2000:]!r}"
    )
    assert first["type"] == "verdict" and first["resumed"] is False
    batch_id = first["batch"]
    assert f"resume with --resume {batch_id}" in err
    assert not [line for line in rest.splitlines() if '"summary"' in line]

    resumed = subprocess.run(
        [sys.executable, "-m", "harness", "check", str(VECTOR_ADD), "--resume", batch_id, *common],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert resumed.returncode == 1, resumed.stderr  # off_by_one fails
    docs = [json.loads(line) for line in resumed.stdout.splitlines()]
    verdicts = [d for d in docs if d["type"] == "verdict"]
    summary = docs[-1]
    assert summary["type"] == "summary" and summary["total"] == 3
    assert summary["passed"] == 2 and summary["failed"] == 1
    again = [d for d in verdicts if d["resumed"]]
    assert [d["path"] for d in again] == [first["path"]]
    assert again[0]["run_dir"] == first["run_dir"]
    checked = {d["path"] for d in verdicts if not d["resumed"]}
    assert checked == {str(p) for p in [*good, bad]} - {first["path"]}

    manifest = isolated_home / "runs" / "vector_add" / f"batch-{batch_id}.jsonl"
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    assert [doc["type"] for doc in lines].count("verdict") == 3
    assert [doc["type"] for doc in lines].count("resume") == 1
