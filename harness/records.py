"""Run records: every check is kept under ``runs/<problem>/<timestamp>-<shorthash>/``.

A record holds the candidate source as checked, ``result.json`` (the verdict document),
``feedback.txt`` (what an agent would be told), the worker's stdout/stderr logs
(trimmed to their last MiB) and the ``trace`` rung's ``*.trace.json`` timelines, every
file redacted of the secret values this process knows (``harness/redact.py``).
``paths.default_runs_dir()`` decides where ``runs/`` is.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .paths import default_runs_dir
from .process.workerfiles import read_tail, read_worker_file
from .redact import known, redact, redact_bytes

if TYPE_CHECKING:
    from .problems.candidate import Candidate
    from .verdict import Verdict

LOG_LIMIT = 1 << 20
TIMELINE_LIMIT = 256 << 20  # a trace rung's timeline: one is kept only up to this size


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "problem"


def new_run_dir(problem: str, sha: str, runs_dir: Path | None = None) -> Path:
    base = (runs_dir or default_runs_dir()) / _safe(problem)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(100):
        suffix = f"-{attempt + 1}" if attempt else ""
        path = base / f"{stamp}-{sha[:8]}{suffix}"
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a run directory under {base}")


def write_record(
    verdict: Verdict, candidate: Candidate, logdir: Path | None, runs_dir: Path | None = None
) -> Path:
    path = new_run_dir(verdict.problem, candidate.sha, runs_dir)
    verdict.run_dir = str(path)
    secrets = known()
    (path / candidate.path.name).write_text(redact(candidate.source, secrets))
    (path / "result.json").write_text(json.dumps(verdict.to_json(), indent=2) + "\n")
    (path / "feedback.txt").write_text(verdict.feedback() + "\n")
    if logdir is not None and logdir.is_dir():
        # a log is a file the worker holds open and may make any size (``ftruncate`` to
        # terabytes of holes): only its tail is ever read
        for log in sorted(logdir.glob("*.log")):
            tail = read_tail(log, LOG_LIMIT)
            if tail is None:
                continue
            data, trimmed = tail
            if trimmed:
                data = b"[... trimmed ...]\n" + data
            (path / log.name).write_bytes(redact_bytes(data, secrets))
        for timeline in sorted(logdir.glob("*.trace.json")):  # trace rung
            whole = read_worker_file(timeline, TIMELINE_LIMIT)
            if whole is not None:
                (path / timeline.name).write_bytes(redact_bytes(whole, secrets))
    return path
