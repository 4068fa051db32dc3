"""Fixtures for the harness tests: a ``run_check`` that keeps CPU runs short.

Every check spawns one worker (one per candidate, as in production): trials, burst and
shapes are kept small here so the whole suite stays within a few minutes on two cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cheatspec import SMALL_SHAPES, problem_path

from harness.runner import LocalRunner, RunOptions, check
from harness.verdict import Verdict

FAST = {"trials": 2, "burst": 3, "timeout_s": 60.0, "record": False, "device": "cpu"}


def worker_context(
    problem: Any, candidate: Any, options: RunOptions, device: str, tmp_path: Path
) -> Any:
    """A ``LadderContext`` whose workers are real ones (``LocalSession``: through the
    sandbox, as a check runs them), the candidate and the problem's files staged in
    ``tmp_path``; the caller closes it."""
    from harness.backends import worker_env_for
    from harness.process.local import LocalSession
    from harness.rungs.context import LadderContext

    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    logs.mkdir()
    candidate.stage(work)
    problem.stage_support_files(work)
    env = worker_env_for(candidate.backend, device)
    problem_dir = Path(problem.path).resolve()
    keep = [problem_dir.parent if problem_dir.is_file() else problem_dir]

    def open_session(tag: str = "", env_extra: dict[str, str] | None = None) -> LocalSession:
        return LocalSession(
            work, logs, device, options, {**env, **(env_extra or {})}, tag, keep, candidate.backend
        )

    return LadderContext(problem, candidate, options, device, open_session)


def run_python(code: str, timeout: float = 300) -> str:
    """``code`` (dedented) in a Python process of its own, from the repository root: for
    what changes process-wide state (torch's dispatch, its modules' attributes). Its
    stdout, stripped; a failure shows the child's stderr."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def fast_options(problem: str | None = None, **overrides: Any) -> RunOptions:
    opts: dict[str, Any] = dict(FAST)
    if problem in SMALL_SHAPES and "shapes" not in overrides:
        opts["shapes"] = SMALL_SHAPES[problem]
    opts.update(overrides)
    return RunOptions(**opts)


@pytest.fixture
def run_check() -> Callable[..., Verdict]:
    """``run_check(problem, candidate, **options)``: problem a name or a path."""

    def run(problem: str | Path, candidate: str | Path, **options: Any) -> Verdict:
        name = problem if isinstance(problem, str) and "/" not in problem else None
        path = problem_path(problem) if name else Path(problem)
        small = name if options.pop("small", True) else None
        return check(path, candidate, fast_options(small, **options), runner=LocalRunner())

    return run


class VerdictPool:
    """Runs checks on a few threads (each check is its own worker process) and hands
    each test its verdict: the suite's wall time is mostly worker start-up (importing
    torch), which overlaps well on two cores."""

    def __init__(self, jobs: int) -> None:
        self.executor = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="check")
        self.futures: dict[str, Future[Verdict]] = {}

    def submit(self, key: str, fn: Callable[[], Verdict]) -> None:
        if key not in self.futures:
            self.futures[key] = self.executor.submit(fn)

    def get(self, key: str, fn: Callable[[], Verdict]) -> Verdict:
        self.submit(key, fn)
        return self.futures[key].result()

    def wait(self) -> None:
        for future in list(self.futures.values()):
            future.exception()


@pytest.fixture(scope="session")
def verdict_pool() -> Iterator[VerdictPool]:
    pool = VerdictPool(int(os.environ.get("CTXKERNEL_TEST_JOBS", "2")))
    yield pool
    pool.wait()
    pool.executor.shutdown()


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A simulated GPU clock under the timing protocol (``simgpu.FakeGPU``)."""
    from simgpu import install_fake_gpu

    return install_fake_gpu(monkeypatch)


@pytest.fixture(params=["auto", "none"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The sandbox mode of this process's workers: the machine's best, then ``none``."""
    from harness.process import sandbox, walls

    if request.param == "none":
        if walls.landlock_abi() < 1:
            pytest.skip("this kernel has no landlock: none mode keeps only seccomp there")
        monkeypatch.setenv("CTXKERNEL_ISOLATION", "none")
    else:
        monkeypatch.delenv("CTXKERNEL_ISOLATION", raising=False)
    monkeypatch.setattr(sandbox, "_isolation", None)
    yield request.param
    sandbox._isolation = None


# what a worker reads: one line per path, "read <its text>" or "refused <why>"
WORKER_READER = r"""
import sys
for path in sys.argv[1:]:
    try:
        with open(path) as fh:
            print("read " + fh.read().strip())
    except OSError as exc:
        print("refused " + type(exc).__name__)
"""
