"""Batches: several candidates checked as one unit, with a manifest so nothing is lost.

A batch's manifest is ``runs/<problem>/batch-<id>.jsonl``, appended to (and synced) as
each verdict arrives: a ``batch`` header (problem, its content hash, the options, the
runner, the planned candidates keyed by the SHA-256 of their source), then one
``verdict`` line per finished candidate with the whole verdict document, and a ``resume``
line each time it is resumed. ``Batch.open(id)`` reads it back; ``run_batch`` skips every
candidate whose content already has a final verdict there (a verdict made by the runner
because the check itself was lost is not final: that candidate runs again), so a batch
interrupted on the controller resumes without re-checking what finished. Candidates with
identical content are checked once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..runner import RunOptions
from .base import LOCAL_ONLY, BatchRunner, is_final, options_to_wire

if TYPE_CHECKING:
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem
    from ..verdict import Verdict

MANIFEST_FORMAT = 1


@dataclass
class BatchItem:
    """One candidate's outcome in a batch; ``resumed``: taken from the manifest."""

    candidate: Candidate
    verdict: Verdict
    key: str
    resumed: bool = False


def problem_digest(problem: Problem) -> str:
    """A hash of the files that define the problem (not the candidates kept beside it)."""
    from .bundle import defining_files

    digest = hashlib.sha256()
    for path in defining_files(problem):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _comparable(options: RunOptions) -> dict[str, Any]:
    return options_to_wire(options, changed_only=True, drop=(*LOCAL_ONLY, "secret"))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "problem"


class Batch:
    """A batch manifest: what was planned and which verdicts are in."""

    def __init__(self, path: Path, header: dict[str, Any], done: dict[str, dict[str, Any]]) -> None:
        self.path = path
        self.header = header
        self.done = done  # key -> verdict document (final ones only)

    @property
    def id(self) -> str:
        return str(self.header["id"])

    @property
    def planned(self) -> list[dict[str, str]]:
        return list(self.header.get("candidates", []))

    @staticmethod
    def directory(problem: Problem, runs_dir: Path | None) -> Path:
        from ..paths import default_runs_dir

        return (runs_dir or default_runs_dir()) / _safe(problem.name)

    @classmethod
    def create(
        cls,
        problem: Problem,
        candidates: Sequence[Candidate],
        options: RunOptions,
        runner: str,
        runs_dir: Path | None = None,
    ) -> Batch:
        keys = [c.sha for c in candidates]
        stamp = time.strftime("%Y%m%d-%H%M%S")
        batch_id = f"{stamp}-{hashlib.sha256(''.join(keys).encode()).hexdigest()[:6]}"
        directory = cls.directory(problem, runs_dir)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"batch-{batch_id}.jsonl"
        suffix = 1
        while path.exists():
            suffix += 1
            path = directory / f"batch-{batch_id}-{suffix}.jsonl"
        if suffix > 1:
            batch_id = f"{batch_id}-{suffix}"
        header = {
            "type": "batch",
            "format": MANIFEST_FORMAT,
            "id": batch_id,
            "problem": problem.name,
            "problem_path": str(problem.path.resolve()),
            "problem_sha": problem_digest(problem),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "runner": runner,
            "options": _comparable(options),
            "candidates": [{"key": c.sha, "path": str(c.path)} for c in candidates],
        }
        batch = cls(path, header, {})
        batch._append(header)
        return batch

    @classmethod
    def open(cls, ref: str, problem: Problem, runs_dir: Path | None = None) -> Batch:
        """A batch by id (under this problem's runs dir) or by the manifest's path."""
        path = Path(ref)
        if not path.is_file():
            name = ref if ref.startswith("batch-") else f"batch-{ref}"
            path = cls.directory(problem, runs_dir) / (
                name if name.endswith(".jsonl") else f"{name}.jsonl"
            )
        if not path.is_file():
            raise UsageError(f"--resume: no batch {ref!r} (looked for {path})")
        header: dict[str, Any] | None = None
        done: dict[str, dict[str, Any]] = {}
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue  # a line cut short when the controller died
                if doc.get("type") == "batch" and header is None:
                    header = doc
                elif doc.get("type") == "planned" and header is not None:
                    header.setdefault("candidates", []).extend(doc.get("candidates", []))
                elif doc.get("type") == "verdict" and doc.get("final", True):
                    done[str(doc["key"])] = doc["verdict"]
        if header is None:
            raise UsageError(f"--resume: {path} is not a batch manifest")
        return cls(path, header, done)

    def check_compatible(self, problem: Problem, options: RunOptions) -> None:
        """A resumed batch must check the same problem under the same options."""
        if self.header.get("problem") != problem.name:
            raise UsageError(
                f"--resume: batch {self.id} is for problem {self.header.get('problem')!r}, not {problem.name!r}"
            )
        if self.header.get("problem_sha") != problem_digest(problem):
            raise UsageError(
                f"--resume: the problem {problem.name} changed since batch {self.id} started; start a new batch"
            )
        then, now = self.header.get("options", {}), _comparable(options)
        differ = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
        if differ:
            raise UsageError(
                f"--resume: options differ from batch {self.id}'s ({', '.join(differ)}); "
                "resume with the same options"
            )

    def plan(self, candidates: Sequence[Candidate]) -> None:
        known = {c["key"] for c in self.planned}
        new = [{"key": c.sha, "path": str(c.path)} for c in candidates if c.sha not in known]
        if new:
            self.header.setdefault("candidates", []).extend(new)
            self._append({"type": "planned", "candidates": new})

    def resumed(self, runner: str) -> None:
        self._append(
            {"type": "resume", "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runner": runner}
        )

    def add(self, candidate: Candidate, verdict: Verdict) -> None:
        final = is_final(verdict)
        document = verdict.to_json()
        doc: dict[str, Any] = {
            "type": "verdict",
            "key": candidate.sha,
            "path": str(candidate.path),
            "ok": verdict.ok,
            "final": final,
            "run_dir": verdict.run_dir,
            "verdict": document,
        }
        self._append(doc)
        if final:
            self.done[candidate.sha] = document

    def _append(self, doc: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(doc) + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def run_batch(
    problem: Problem,
    candidates: Sequence[Candidate],
    options: RunOptions,
    runner: BatchRunner,
    batch: Batch | None = None,
) -> Generator[BatchItem, None, None]:
    """Every candidate's verdict: first those the manifest already has, then the others
    as the runner finishes them, each written to the manifest before it is yielded."""
    from ..verdict import Verdict

    todo: dict[str, Candidate] = {}
    twins: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        key = candidate.sha
        if batch is not None and key in batch.done:
            yield BatchItem(candidate, Verdict.from_json(batch.done[key]), key, resumed=True)
        elif key in todo:
            twins.setdefault(key, []).append(candidate)
        else:
            todo[key] = candidate
    if not todo:
        return
    for candidate, verdict in runner.run_many(problem, list(todo.values()), options):
        if batch is not None:
            batch.add(candidate, verdict)
        yield BatchItem(candidate, verdict, candidate.sha)
        for twin in twins.get(candidate.sha, []):
            yield BatchItem(twin, verdict, candidate.sha)
