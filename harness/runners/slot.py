"""A pool slot: one long-lived process, pinned to one GPU (or none), that runs the ladder.

``python -m harness.runners.slot --fd-out N`` is started by ``PoolRunner`` with
``CUDA_VISIBLE_DEVICES`` already pinned. It reads jobs as JSON lines on stdin (problem
path, candidate path, declared backend, options), runs each through ``LocalRunner`` —
which spawns the candidate's own isolated worker, as for any check — and writes replies
as JSON lines on fd N: ``ready``, then ``started`` and ``result`` (or ``error``) per job.
Its stdout and stderr are a log file; replies never travel on them. It exits on EOF or
a ``bye`` line, and is killed (``PR_SET_PDEATHSIG``) when the pool's thread that started
it ends. The slot imports torch once, so only the isolated worker starts per check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path
from typing import IO, Any

from .. import envvars


def _send(out: IO[str], doc: dict[str, Any]) -> None:
    out.write(json.dumps(doc) + "\n")
    out.flush()


def serve(out: IO[str], lines: IO[str]) -> int:
    from ..errors import UsageError
    from ..problems.candidate import load_candidate
    from ..problems.problem import Problem, load_problem
    from ..runner import LocalRunner
    from .base import options_from_wire

    problems: dict[tuple[str, float], Problem] = {}
    _send(
        out,
        {
            "type": "ready",
            "pid": os.getpid(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        },
    )
    for line in lines:
        if not line.strip():
            continue
        msg = json.loads(line)
        if msg.get("type") == "bye":
            return 0
        job_id = msg.get("id")
        _send(out, {"type": "started", "id": job_id, "pid": os.getpid()})
        try:
            problem_path = Path(msg["problem"])
            key = (str(problem_path), _mtime(problem_path))
            problem = problems.get(key)
            if problem is None:
                problem = problems[key] = load_problem(problem_path)
            candidate = load_candidate(msg["candidate"], problem, backend=msg.get("backend"))
            options = options_from_wire(msg.get("options") or {})
            verdict = LocalRunner().run(problem, candidate, options)
            reply: dict[str, Any] = {"type": "result", "id": job_id, "verdict": verdict.to_json()}
        except UsageError as exc:
            reply = {"type": "error", "id": job_id, "kind": "usage", "message": str(exc)}
        except Exception as exc:
            detail = traceback.format_exc()
            sys.stderr.write(detail)
            reply = {
                "type": "error",
                "id": job_id,
                "kind": "internal",
                "message": f"{type(exc).__name__}: {exc}",
                "detail": detail[-3000:],
            }
        _send(out, reply)
    return 0


def _mtime(path: Path) -> float:
    target = path / "problem.py" if path.is_dir() else path
    try:
        return target.stat().st_mtime
    except OSError:
        return 0.0


def cpu_share(cpus: int, slots: int | None) -> int | None:
    """Torch threads for one slot of ``slots`` on ``cpus`` CPUs (None: leave torch's
    default). Each slot's comparisons, signal checks and copies run on torch's CPU thread
    pool, one thread per CPU by default: three slots on 16 CPUs ran 48 threads, and a
    check's own work in its parent went from 0.2 s to 3.4 s (27.7 candidates/min instead
    of 56.6 with two threads a slot; bench/RESULTS.md, 2026-12-06 06:00)."""
    if not slots or slots <= 1:
        return None
    return max(1, cpus // slots)


def share_cpus() -> None:
    """This slot's share of the CPUs for torch, unless the user chose (OMP_NUM_THREADS)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return
    threads = cpu_share(len(os.sched_getaffinity(0)), envvars.CTXKERNEL_POOL_SLOTS.get())
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.runners.slot")
    parser.add_argument("--fd-out", type=int, required=True, help="where replies go")
    parser.add_argument("--parent", type=int, default=None, help="the pool's PID")
    args = parser.parse_args(argv)
    from ..process.sandbox import die_with_parent

    die_with_parent()  # with the pool's slot thread, whatever signal ends the pool
    share_cpus()
    if args.parent is not None and os.getppid() != args.parent:
        return 1
    out = os.fdopen(args.fd_out, "w", buffering=1, encoding="utf-8")
    try:
        return serve(out, sys.stdin)
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(main())
