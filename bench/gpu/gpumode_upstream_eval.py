"""Run GPU MODE's own ``eval.py`` unchanged on an upstream file, to compare with our verdict.

When ``ctxkernel check`` rejects a file upstream labels "correct", the question is whether
upstream's own evaluator accepts it on the same machine. This script assembles the directory
``task.yml`` describes (``submission.py`` = the file, ``task.py``, ``utils.py``,
``reference.py``, ``eval.py``), writes the task's ``tests`` as upstream's tests file and runs
``POPCORN_FD=1 python3 eval.py test tests.txt``, printing upstream's own log lines::

    python bench/gpu/gpumode_upstream_eval.py bench/.upstream/reference-kernels/problems/pmpp_v2/conv2d_py \\
        solutions/correct/ref.py [--out OUT.json]

Needs a CUDA device (every pmpp_v2 problem builds its inputs on CUDA).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def tests_file(task_yml: Path) -> str:
    # the cases are one JSON object per line under "tests:" (no YAML parser on the device)
    cases, inside = [], False
    for line in task_yml.read_text().splitlines():
        if not line.startswith(" ") and line.strip():
            inside = line.startswith("tests:")
            continue
        item = line.strip()
        if inside and item.startswith("- {"):
            cases.append(json.loads(item[2:]))
    lines = ["; ".join(f"{k}: {v}" for k, v in case.items()) for case in cases]
    return "\n".join(lines) + "\n"


def run(problem: Path, file: str, timeout: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copy(problem / file, work / "submission.py")
        for name in ("task.py", "reference.py"):
            shutil.copy(problem / name, work / name)
        for name in ("utils.py", "eval.py"):
            shutil.copy(problem.parent / name, work / name)
        (work / "tests.txt").write_text(tests_file(problem / "task.yml"))
        env = dict(os.environ, POPCORN_FD="1")
        t0 = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "eval.py", "test", "tests.txt"], cwd=work, env=env,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        return {
            "problem": problem.name,
            "file": file,
            "exit": proc.returncode,
            "wall_s": round(time.monotonic() - t0, 2),
            "log": proc.stdout.strip().splitlines()[-40:],
            "stderr": proc.stderr.strip().splitlines()[-10:],
        }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("problem", type=Path, help="a pmpp_v2 problem directory (holds task.yml)")
    ap.add_argument("files", nargs="+", help="files relative to the problem directory")
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not (args.problem / "task.yml").is_file():
        print(f"error: {args.problem} has no task.yml", file=sys.stderr)
        return 2
    results = [run(args.problem, f, args.timeout) for f in args.files]
    for r in results:
        print(f"== {r['problem']} {r['file']}: upstream eval exit {r['exit']} in {r['wall_s']} s")
        for line in r["log"]:
            print("   ", line)
        for line in r["stderr"]:
            print("  !", line)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
