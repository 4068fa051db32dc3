"""Runners: where a candidate's worker runs. ``Runner`` is the seam, ``LocalRunner`` the default.

``Runner.run(problem, candidate, options) -> Verdict`` is all a caller sees; the rung
ladder talks to its worker only through a ``WorkerSession`` (``request`` / ``close``,
defined in ``process/session.py`` with ``WorkerGone``), so a pool, SSH or Ray runner can
run the same rungs wherever the GPU is. ``RunOptions`` is in ``options.py``; both are
importable from here. The rungs import neither this module nor the runners.

``LocalRunner`` runs the ladder here, its workers ``LocalSession``s (``process/local.py``:
a child process of this one through the sandbox).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .options import RunOptions
from .process import cleanup, sandbox
from .process.local import LocalSession, run_oneshot

if TYPE_CHECKING:
    from .problems.candidate import Candidate
    from .problems.problem import Problem
    from .verdict import Verdict

__all__ = [
    "LocalRunner",
    "RunOptions",
    "Runner",
    "check",
    "resolved_isolation",
]


class Runner(Protocol):
    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict: ...


class LocalRunner:
    """Runs the ladder here, with the candidate's worker a child process of this one.
    ``ladder`` replaces the default rungs (the GPU validation times a planted cheat with
    compile + benchmark only)."""

    def __init__(self, ladder: Any = None, on_rung: Any = None) -> None:
        self.ladder = ladder
        self.on_rung = on_rung  # hears each rung's result as it ends (``Ladder.run``)
        cleanup.install_signal_cleanup()

    def run(self, problem: Problem, candidate: Candidate, options: RunOptions) -> Verdict:
        from .backends import worker_env_for
        from .perf import livechecks
        from .records import write_record
        from .rungs.context import LadderContext
        from .rungs.ladder import Ladder

        device = options.resolved_device()
        isolation = resolved_isolation()
        cleanup.install_signal_cleanup()
        cleanup.sweep_once()
        root = cleanup.temp_root("ctxkernel-check-")
        try:
            workdir = root / "work"
            logdir = root / "logs"
            workdir.mkdir()
            logdir.mkdir()
            candidate.stage(workdir)
            problem.stage_support_files(workdir)
            dump = bool(options.dump_dir or options.target)
            env_extra = worker_env_for(candidate.backend, device, dump=dump)

            opened: list[LocalSession] = []
            problem_dir = Path(problem.path).resolve()
            keep = [problem_dir.parent if problem_dir.is_file() else problem_dir]

            def open_session(tag: str = "", env: dict[str, str] | None = None) -> LocalSession:
                extra = {**env_extra, **(env or {})}
                session = LocalSession(
                    workdir,
                    logdir,
                    device,
                    options,
                    extra,
                    tag=tag,
                    keep_paths=keep,
                    backend=candidate.backend,
                )
                opened.append(session)
                return session

            oneshot = functools.partial(
                run_oneshot, workdir, logdir, device, options, env_extra, keep_paths=keep
            )
            ctx = LadderContext(problem, candidate, options, device, open_session, oneshot)
            try:
                with livechecks.registered() as ctx.live:  # seen by this user's other checks
                    verdict = (self.ladder or Ladder.default()).run(ctx, self.on_rung)
            finally:
                ctx.close()
            verdict.environment["isolation"] = isolation.as_json()
            verdict.environment["workers"] = _workers_note(opened)
            verdict.redact_secrets()
            if options.record:
                verdict.run_dir = str(write_record(verdict, candidate, logdir, options.runs_dir))
            return verdict
        finally:
            cleanup.remove_root(root)


def _workers_note(sessions: Sequence[LocalSession]) -> dict[str, Any]:
    """How this check's workers started: forked from the warm template, or spawned."""
    doc: dict[str, Any] = {
        "forked": sum(1 for s in sessions if s.started_by == "template"),
        "spawned": sum(1 for s in sessions if s.started_by != "template"),
    }
    notes = sorted({s.warm_note for s in sessions if s.warm_note})
    if notes:
        doc["note"] = notes[0]
    return doc


def resolved_isolation() -> sandbox.Isolation:
    """This process's sandbox mode; a bad ``CTXKERNEL_ISOLATION`` is a usage error."""
    from .errors import UsageError

    try:
        return sandbox.isolation()
    except sandbox.SandboxError as exc:
        raise UsageError(str(exc)) from None


def check(
    problem_path: str | Path,
    candidate_path: str | Path,
    options: RunOptions | None = None,
    runner: Runner | None = None,
) -> Verdict:
    """Load a problem and a candidate from paths and return the verdict."""
    from .problems.candidate import load_candidate
    from .problems.problem import load_problem

    options = options or RunOptions()
    problem = load_problem(problem_path)
    candidate = load_candidate(candidate_path, problem, backend=options.backend)
    return (runner or LocalRunner()).run(problem, candidate, options)
