"""``check PROBLEM CAND [CAND ...] [--runner SPEC] [--jobs N] [--resume BATCH]``: the batch
side of the check command (``harness.cli.execute_check`` hands over to ``execute_batch``).

Text output: one line per candidate as it finishes (``PASSED``/``FAILED at <rung>``, the
reason, where it ran, the run record), then a summary line; ``--feedback`` adds each
candidate's LLM feedback. ``--json``: JSON Lines, one ``verdict`` document per candidate
(with ``path``, ``key``, ``batch`` and ``resumed``) and a final ``summary``. Progress
(which batch, how to resume) goes to stderr, and not with ``--json``. Exit 0 when every
candidate passed, 1 when any failed, 2 on a usage or runner error, 130 when interrupted
(the manifest keeps every verdict that arrived; ``--resume`` picks up from there).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..printable import printable

if TYPE_CHECKING:
    from ..problems.problem import Problem
    from ..runner import RunOptions
    from .batch import BatchItem


def default_runner(runner: str | None, jobs: int | None, count: int) -> str:
    """Several candidates go to the pool; one, with no --jobs, runs locally."""
    if runner:
        return runner
    return "pool" if count > 1 or jobs else "local"


def is_remote(runner: str | None) -> bool:
    return bool(runner) and (str(runner).startswith("ssh://") or str(runner).split(":")[0] == "ray")


def where(verdict_env: dict[str, Any]) -> str:
    info = verdict_env.get("runner") or {}
    kind = info.get("kind", "")
    parts = [str(kind)] if kind else []
    if kind == "pool" and info.get("slot") is not None:
        parts.append(f"slot {info['slot']}" + (f" GPU {info['gpu']}" if info.get("gpu") else ""))
    if info.get("host"):
        parts.append(str(info["host"]))
    if info.get("node"):
        parts.append(f"node {info['node']}")
    if info.get("attempt", 1) > 1:
        parts.append(f"attempt {info['attempt']}")
    return ", ".join(parts)


def execute_batch(
    problem: Problem,
    candidate_paths: Sequence[Path],
    options: RunOptions,
    runner: str | None = None,
    jobs: int | None = None,
    resume: str | None = None,
    as_json: bool = False,
    feedback: bool = False,
    echo: Callable[[str], None] | None = None,
) -> int:
    from ..problems.candidate import load_candidate
    from . import get_runner
    from .batch import Batch, run_batch

    out = echo or (lambda text: print(text, flush=True))
    if jobs is not None and jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if resume and not options.record:
        raise UsageError("--resume needs run records (drop --no-record)")
    batch: Batch | None = None
    if resume:
        batch = Batch.open(resume, problem, options.runs_dir)
        batch.check_compatible(problem, options)
        if not candidate_paths:
            candidate_paths = [Path(c["path"]) for c in batch.planned]
            missing = [p for p in candidate_paths if not p.is_file()]
            if missing:
                raise UsageError(
                    f"--resume: candidate file(s) gone: {', '.join(map(str, missing[:3]))}"
                )
    if not candidate_paths:
        raise UsageError("give at least one CANDIDATE (or --resume BATCH)")
    candidates = [load_candidate(p, problem, backend=options.backend) for p in candidate_paths]
    spec = default_runner(runner, jobs, len(candidates))
    if batch is None and options.record:
        batch = Batch.create(problem, candidates, options, spec, options.runs_dir)
    elif batch is not None:
        batch.plan(candidates)
        batch.resumed(spec)
    chosen = get_runner(spec, jobs)
    if not as_json:
        done = sum(1 for c in candidates if batch is not None and c.sha in batch.done)
        note = f"batch {batch.id}: " if batch else ""
        again = f" ({done} already done)" if done else ""
        print(
            f"{note}{len(candidates)} candidates against {problem.name} on {chosen.spec}{again}"
            + (f"; resume with --resume {batch.id}" if batch else ""),
            file=sys.stderr,
            flush=True,
        )
    started = time.monotonic()
    items: list[BatchItem] = []
    try:
        for item in run_batch(problem, candidates, options, chosen, batch):
            items.append(item)
            _render(item, batch, as_json, feedback, out)
    except KeyboardInterrupt:
        if batch is not None:
            print(
                f"interrupted: {len(items)} of {len(candidates)} verdicts kept in {batch.path}; "
                f"resume with --resume {batch.id}",
                file=sys.stderr,
            )
        return 130
    finally:
        chosen.close()
    passed = sum(1 for i in items if i.verdict.ok)
    summary = {
        "type": "summary",
        "batch": batch.id if batch else None,
        "manifest": str(batch.path) if batch else None,
        "problem": problem.name,
        "runner": chosen.spec,
        "total": len(items),
        "passed": passed,
        "failed": len(items) - passed,
        "resumed": sum(1 for i in items if i.resumed),
        "requeued": sum(
            1 for i in items if (i.verdict.environment.get("runner") or {}).get("lost")
        ),
        "wall_s": round(time.monotonic() - started, 3),
    }
    if as_json:
        out(json.dumps(summary))
    else:
        tail = f"; manifest {batch.path}" if batch else ""
        out(
            f"{summary['total']} candidates: {passed} passed, {summary['failed']} failed "
            f"({chosen.spec}, {summary['wall_s']:.1f} s){tail}"
        )
    return 0 if passed == len(items) else 1


def _render(
    item: BatchItem, batch: Any, as_json: bool, feedback: bool, out: Callable[[str], None]
) -> None:
    verdict = item.verdict
    if as_json:
        doc = verdict.to_json()
        doc.update(
            {
                "path": str(item.candidate.path),
                "key": item.key,
                "batch": batch.id if batch else None,
                "resumed": item.resumed,
            }
        )
        out(json.dumps(doc))
        return
    failed = verdict.failed_rung
    head = "PASSED" if verdict.ok else f"FAILED at {failed.name if failed else '?'}"
    parts = [f"{head:<22} {item.candidate.path}"]
    if failed is not None and failed.reason:
        parts.append(f"-- {failed.reason.splitlines()[0][:160]}")
    ran = "from the manifest" if item.resumed else where(verdict.environment)
    if ran:
        parts.append(f"[{ran}]")
    out(printable("  ".join(parts), newlines=False))  # a reason holds the candidate's words
    lost = (verdict.environment.get("runner") or {}).get("lost") or []
    for reason in lost:
        out(printable(f"    re-queued after: {reason}", newlines=False))
    if verdict.run_dir:
        out(f"    run: {verdict.run_dir}")
    if feedback:
        for line in verdict.feedback().splitlines():
            out(f"    {line}")
