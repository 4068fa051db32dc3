"""What every batch runner shares: the ``BatchRunner`` seam, jobs, options on the wire.

A ``Runner`` (``harness.runner``) checks one candidate; a ``BatchRunner`` checks many and
yields ``(candidate, verdict)`` pairs as they finish, whichever finishes first. Each
runner only decides *where* the ladder runs (a pool slot pinned to a GPU, an SSH host, a
Ray node); the ladder itself is always ``LocalRunner`` on that machine, so the same rungs
run wherever the GPU is.

When the machinery under a check is lost (a slot process killed, a Ray worker or node
gone, an SSH connection dropped), the candidate is re-queued once and the reason is kept
in ``verdict.environment["runner"]["lost"]``; when it is lost again the candidate gets a
failed verdict whose single rung, ``runner``, says why. Such a verdict is not *final*: a
resumed batch runs the candidate again.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import UsageError
from ..runner import RunOptions

if TYPE_CHECKING:
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem
    from ..runner import Runner
    from ..verdict import Verdict

RUNNER_RUNG = "runner"
DEFAULT_ATTEMPTS = 2  # a candidate whose machinery is lost runs once more, then fails


class RunnerError(UsageError):
    """The runner cannot work at all (host unreachable, host key mismatch, no harness on
    the host, Ray not installed): one line for the user, exit status 2."""


@runtime_checkable
class BatchRunner(Protocol):
    """Checks several candidates concurrently; yields each verdict as it finishes."""

    spec: str

    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict: ...

    def run_many(
        self, problem: Problem, candidates: Sequence[Candidate], options: RunOptions
    ) -> Iterator[tuple[Candidate, Verdict]]: ...

    def close(self) -> None: ...


@dataclass
class Job:
    """One candidate in flight: which attempt this is and why earlier attempts were lost."""

    index: int
    candidate: Candidate
    attempt: int = 1
    lost: list[str] = field(default_factory=list)


def first_of(
    runner: BatchRunner, problem: Problem, candidate: Candidate, options: RunOptions
) -> Verdict:
    """``Runner.run`` for a batch runner: a batch of one."""
    for _, verdict in runner.run_many(problem, [candidate], options):
        return verdict
    raise RuntimeError("the runner returned no verdict")  # pragma: no cover


def default_deadline(options: RunOptions) -> float:
    """Seconds one whole check may take before its runner declares it hung: generous,
    since every request inside it already has its own timeout."""
    seconds = options.startup_timeout_s + max(options.import_timeout_s(), 600.0)
    seconds += options.first_call_timeout_s + 40 * options.timeout_s
    if getattr(options, "bench", False):
        seconds += 600
    if getattr(options, "profile", False):
        seconds += 900
    if getattr(options, "trace", False):  # trace rung: instrumented build + worker
        seconds += 600
    return max(900.0, seconds)


# -- options on the wire --------------------------------------------------------------------

# Where a check runs decides these; they are never shipped.
LOCAL_ONLY = ("runs_dir", "python", "record")


def options_to_wire(
    options: RunOptions, *, changed_only: bool = False, drop: Iterable[str] = ()
) -> dict[str, Any]:
    """``RunOptions`` as JSON-able data; ``changed_only`` keeps fields that differ from the
    defaults, so an older harness on the far side can tell when it cannot honour one."""
    dropped = set(drop)
    doc: dict[str, Any] = {}
    for f in fields(RunOptions):
        if f.name in dropped:
            continue
        value = getattr(options, f.name)
        if changed_only and value == _default_of(f):
            continue
        doc[f.name] = _to_wire(value)
    return doc


def options_from_wire(doc: dict[str, Any]) -> RunOptions:
    known = {f.name: f for f in fields(RunOptions)}
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise RunnerError(
            f"this harness does not know the option(s) {', '.join(unknown)}: "
            "update the harness on this machine to the controller's version"
        )
    values = {name: _from_wire(value, str(known[name].type)) for name, value in doc.items()}
    return RunOptions(**values)


def path_options(options: RunOptions) -> dict[str, Path]:
    """Options naming a local directory or file (e.g. a dump directory), besides runs_dir:
    a remote runner redirects them into the job and copies what lands there back."""
    out: dict[str, Path] = {}
    for f in fields(RunOptions):
        if f.name in LOCAL_ONLY:
            continue
        value = getattr(options, f.name)
        if isinstance(value, Path):
            out[f.name] = value
    return out


def _default_of(f: Any) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def _to_wire(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [_to_wire(v) for v in value]
    if isinstance(value, list):
        return [_to_wire(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_wire(v) for k, v in value.items()}
    return value


def _from_wire(value: Any, annotation: str) -> Any:
    if value is None:
        return None
    if isinstance(value, str) and "Path" in annotation:
        return Path(value)
    if isinstance(value, list) and annotation.startswith("tuple"):
        return tuple(value)
    return value


# -- verdicts made by the runner ------------------------------------------------------------


def runner_info(kind: str, job: Job, **extra: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"kind": kind, "attempt": job.attempt}
    if job.lost:
        info["lost"] = list(job.lost)
    info.update({k: v for k, v in extra.items() if v is not None})
    return info


def failure_verdict(
    problem: Problem, candidate: Candidate, options: RunOptions, reason: str, info: dict[str, Any]
) -> Verdict:
    """A failed verdict for a candidate whose check never completed (its machinery was
    lost): one ``runner`` rung with the reason; ``environment.runner.final`` is False."""
    from ..verdict import RungResult, Verdict

    return Verdict(
        ok=False,
        problem=problem.name,
        problem_format=problem.format,
        candidate=str(candidate.path),
        backend=candidate.backend,
        device=options.device or "",
        interpreter=False,
        rungs=[RungResult(RUNNER_RUNG, False, True, {}, reason)],
        environment={"runner": {**info, "final": False}},
    )


def is_final(verdict: Verdict) -> bool:
    """False for a verdict made by the runner because the check itself never completed."""
    info = verdict.environment.get("runner")
    return not (isinstance(info, dict) and info.get("final") is False)


def annotate(verdict: Verdict, info: dict[str, Any]) -> Verdict:
    """Say in the verdict (and its run record) which runner produced it."""
    runner = dict(verdict.environment.get("runner") or {})
    runner.update(info)
    verdict.environment["runner"] = runner
    verdict.redact_secrets()
    if verdict.run_dir:
        result = Path(verdict.run_dir) / "result.json"
        if result.parent.is_dir():
            result.write_text(json.dumps(verdict.to_json(), indent=2) + "\n")
            # the record may come from a process that knew fewer secrets (a pool slot
            # or a remote host): this one redacts what it knows, as a last line of defence
            from ..redact import redact_tree

            redact_tree(result.parent)
    return verdict


def record_failure(
    verdict: Verdict, candidate: Candidate, options: RunOptions, logdir: Path | None
) -> Verdict:
    """Keep a runner-made verdict in the run records too (with the slot's or host's log)."""
    if options.record:
        from ..records import write_record

        write_record(verdict, candidate, logdir, options.runs_dir)
    return verdict


# -- a plain Runner on threads -----------------------------------------------------------------


class ThreadedRunner:
    """Any single-check ``Runner`` (``LocalRunner`` by default) on ``jobs`` threads; each
    check already runs its candidate in its own worker process."""

    def __init__(self, runner: Runner | None = None, jobs: int = 1, spec: str = "local") -> None:
        from ..runner import LocalRunner

        self.runner: Runner = runner or LocalRunner()
        self.jobs = max(1, jobs)
        self.spec = spec

    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict:
        return self.runner.run(problem, candidate, options)

    def run_many(
        self, problem: Problem, candidates: Sequence[Candidate], options: RunOptions
    ) -> Iterator[tuple[Candidate, Verdict]]:
        def one(candidate: Candidate) -> Verdict:
            return annotate(self.runner.run(problem, candidate, options), {"kind": self.spec})

        yield from map_unordered(one, candidates, self.jobs)

    def close(self) -> None:
        pass


def map_unordered(
    fn: Callable[[Candidate], Verdict], items: Sequence[Candidate], jobs: int
) -> Iterator[tuple[Candidate, Verdict]]:
    """``fn`` over ``items`` on ``jobs`` threads, yielding as each finishes. Leaving the
    iterator early cancels what has not started."""
    executor = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="check")
    pending: dict[Future[Verdict], Candidate] = {executor.submit(fn, c): c for c in items}
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                candidate = pending.pop(future)
                yield candidate, future.result()
    finally:
        for future in pending:
            future.cancel()
        executor.shutdown(wait=True, cancel_futures=True)


class Counter:
    """A thread-safe counter (slots started, jobs done) for progress and events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def next(self) -> int:
        with self._lock:
            self.value += 1
            return self.value
