"""Run records of the agent loop (and of external agents checking through MCP).

One directory per run, ``runs/agent/<run-id>/`` beside the harness's own check records
(``runs/<problem>/...``), so the two never collide::

    run.json            what was asked: problem, backend, model, options (never a key)
    transcript.jsonl    every event: requests with usage and cost, messages, tool calls,
                        retries, versions, trims, stops (one JSON object a line, a "type")
    state.json          the conversation and counters after the last finished round:
                        what ``--resume`` continues from
    versions/<n>/       candidate.py, verdict.json, feedback.txt, meta.json;
                        conversation.json (the conversation right after the model read
                        this version's verdict: what ``/back N`` continues from);
                        recheck/ (the fresh re-check on unseen shapes, when it was run)
    best.py             the best correct version, written out as the result
    summary.json        status, stop reason, best version, tokens, cost, wall time
    steer.md            the engineer's notes for the running model, one per paragraph

Files are written whole through a temporary file and a rename, so a run killed at any
moment leaves readable records. The run id is ``<YYYYmmdd-HHMMSS>-<problem>-<4 hex>``.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import paths

from ..errors import UserError

AGENT_SUBDIR = "agent"


def agent_runs_dir(runs_dir: Path | None = None) -> Path:
    return (runs_dir or paths.default_runs_dir()) / AGENT_SUBDIR


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "problem"


def write_json(path: Path, doc: Any) -> None:
    """Write a JSON document whole (temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def rank_key(meta: Mapping[str, Any]) -> tuple[Any, ...]:
    """Order of versions, best first: correct, then faster, then nearer the roofline,
    then further up the ladder, then earlier."""
    time_us = meta.get("time_us")
    roofline = meta.get("roofline")
    return (
        0 if meta.get("ok") else 1,
        time_us if isinstance(time_us, (int, float)) else math.inf,
        -(roofline if isinstance(roofline, (int, float)) else 0.0),
        -int(meta.get("level") or 0),
        int(meta.get("version") or 0),
    )


def best_of(metas: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The best correct version, or None. A version that lost to an earlier best when
    the two were re-timed side by side (``beaten_by``) is correct but never the best."""
    correct = [m for m in metas if m.get("ok") and not m.get("beaten_by")]
    return min(correct, key=rank_key) if correct else None


@dataclass(frozen=True)
class Performance:
    """How fast a checked version was, as far as the harness measured it."""

    time_us: float | None = None
    roofline: float | None = None  # fraction of the roofline, 0..1
    speedup: float | None = None
    bound: str | None = None


def performance_of(meta: Mapping[str, Any]) -> Performance:
    """A version's performance from its meta (or ``Outcome.to_json()``): the one place
    the agent's display and re-checks read it, so a change in how verdicts expose
    performance is made here."""

    def number(key: str) -> float | None:
        value = meta.get(key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        return float(value) if math.isfinite(value) else None

    bound = meta.get("bound")
    return Performance(
        number("time_us"), number("roofline"), number("speedup"),
        bound if isinstance(bound, str) else None,
    )  # fmt: skip


class RunRecord:
    """The files of one run; safe to use from several threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        return self.path.name

    @classmethod
    def create(
        cls, problem: str, config: Mapping[str, Any], runs_dir: Path | None = None
    ) -> RunRecord:
        base = agent_runs_dir(runs_dir)
        base.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for _ in range(100):
            path = base / f"{stamp}-{_safe(problem)}-{secrets.token_hex(2)}"
            try:
                path.mkdir()
                break
            except FileExistsError:
                continue
        else:
            raise UserError(f"cannot create a run directory under {base}")
        record = cls(path)
        (path / "versions").mkdir()
        write_json(path / "run.json", {"type": "run", "id": record.id, **config})
        return record

    @classmethod
    def open(cls, ref: str | Path, runs_dir: Path | None = None) -> RunRecord:
        return cls(resolve_run(ref, runs_dir))

    # -- files -----------------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        return read_json(self.path / "run.json") or {}

    def update_config(self, changes: Mapping[str, Any]) -> None:
        with self._lock:
            write_json(self.path / "run.json", {**self.config, **changes})

    def log(self, event: Mapping[str, Any]) -> None:
        """Append one event to the transcript."""
        line = json.dumps({"time": round(time.time(), 3), **event}, default=str)
        with self._lock, open(self.path / "transcript.jsonl", "a") as fh:
            fh.write(line + "\n")

    def transcript(self) -> Iterator[dict[str, Any]]:
        path = self.path / "transcript.jsonl"
        if not path.is_file():
            return
        with open(path) as fh:
            for line in fh:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by a crash

    def load_state(self) -> dict[str, Any] | None:
        state = read_json(self.path / "state.json")
        return state if isinstance(state, dict) else None

    def save_state(self, state: Mapping[str, Any]) -> None:
        with self._lock:
            write_json(self.path / "state.json", dict(state))

    def summary(self) -> dict[str, Any] | None:
        doc = read_json(self.path / "summary.json")
        return doc if isinstance(doc, dict) else None

    def write_summary(self, doc: Mapping[str, Any]) -> None:
        with self._lock:
            write_json(self.path / "summary.json", {"type": "summary", "id": self.id, **doc})

    # -- versions ----------------------------------------------------------------------

    def version_dir(self, n: int) -> Path:
        return self.path / "versions" / str(n)

    def new_version(self, source: str, meta: Mapping[str, Any]) -> tuple[int, Path]:
        """Reserve the next version number and keep its source; returns (n, candidate path)."""
        with self._lock:
            n = 1 + max((v for v in self._version_numbers()), default=0)
            folder = self.version_dir(n)
            folder.mkdir(parents=True)
        candidate = folder / "candidate.py"
        candidate.write_text(source)
        write_json(folder / "meta.json", {"version": n, **meta})
        return n, candidate

    def finish_version(
        self, n: int, verdict: Mapping[str, Any] | None, feedback: str, meta: Mapping[str, Any]
    ) -> dict[str, Any]:
        folder = self.version_dir(n)
        if verdict is not None:
            write_json(folder / "verdict.json", verdict)
        (folder / "feedback.txt").write_text(feedback.rstrip() + "\n")
        doc = {**(read_json(folder / "meta.json") or {}), **meta, "version": n}
        write_json(folder / "meta.json", doc)
        return doc

    def update_meta(self, n: int, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Merge ``changes`` into version n's meta; the new meta."""
        path = self.version_dir(n) / "meta.json"
        with self._lock:
            doc = {**(read_json(path) or {}), **changes, "version": n}
            write_json(path, doc)
        return doc

    def save_conversation(self, n: int, messages: list[dict[str, Any]]) -> None:
        write_json(self.version_dir(n) / "conversation.json", messages)

    def conversation(self, n: int) -> list[dict[str, Any]] | None:
        """The conversation right after the model read version n's verdict, if kept."""
        doc = read_json(self.version_dir(n) / "conversation.json")
        return doc if isinstance(doc, list) and doc else None

    def notes(self) -> list[dict[str, Any]]:
        """The engineer's notes, in the order they arrived (``note`` events)."""
        return [e for e in self.transcript() if e.get("type") == "note"]

    def _version_numbers(self) -> list[int]:
        folder = self.path / "versions"
        if not folder.is_dir():
            return []
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())

    def versions(self) -> list[dict[str, Any]]:
        """Every version's meta (finished or not), in order."""
        out = []
        for n in self._version_numbers():
            meta = read_json(self.version_dir(n) / "meta.json") or {}
            out.append({"version": n, **meta})
        return out

    def source(self, n: int) -> str:
        return (self.version_dir(n) / "candidate.py").read_text()

    def write_best(self) -> dict[str, Any] | None:
        """Copy the best correct version to ``best.py``; its meta, or None."""
        best = best_of(self.versions())
        if best is not None:
            shutil.copyfile(
                self.version_dir(best["version"]) / "candidate.py", self.path / "best.py"
            )
        return best


def list_runs(runs_dir: Path | None = None) -> list[RunRecord]:
    """Agent runs, oldest first (ids sort by time)."""
    base = agent_runs_dir(runs_dir)
    if not base.is_dir():
        return []
    return [RunRecord(p) for p in sorted(base.iterdir()) if (p / "run.json").is_file()]


def resolve_run(ref: str | Path, runs_dir: Path | None = None) -> Path:
    """A run directory from a path, an id, a unique part of an id, or ``last``."""
    given = Path(ref)
    if given.is_dir() and (given / "run.json").is_file():
        return given
    text = str(ref)
    runs = list_runs(runs_dir)
    if text in ("last", "latest"):
        if not runs:
            raise UserError("no agent runs yet")
        return runs[-1].path
    exact = [r for r in runs if r.id == text]
    if exact:
        return exact[0].path
    matches = [r for r in runs if r.id.startswith(text)] or [r for r in runs if text in r.id]
    if len(matches) == 1:
        return matches[0].path
    if not matches:
        raise UserError(f"no agent run matches {text!r} (see `ctxkernel runs`)")
    raise UserError(
        f"{text!r} matches {len(matches)} runs: " + ", ".join(r.id for r in matches[:5])
    )
