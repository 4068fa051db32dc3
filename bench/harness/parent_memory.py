"""The check's own peak memory: one `harness check --no-server` in this process, its
resident set sampled every 10 ms, printed with the largest input's size beside it, and
the check's wall time.

The parent holds the inputs, the reference's outputs and every comparison; at upstream
KernelBench sizes that is what ran out of memory on the GPU (bench/RESULTS.md, 2026-12-05
15:30). On a CPU the same parent code runs in host memory, so its peak measures what the
pre-checks and the correctness rung hold, as a multiple of one input:

    python bench/harness/parent_memory.py PROBLEM CANDIDATE [harness check options]
    python bench/harness/parent_memory.py --base BASE_TREE PROBLEM CANDIDATE ...

``--base`` runs the same check from another tree (``bench/baseline.py`` makes one) first,
in a process of its own, for the before/after pair.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rss_kib() -> int:
    with open(f"/proc/{os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def measure(args: list[str]) -> dict[str, object]:
    """Run the check here; the peak resident set (MiB) and the verdict's last line."""
    peak = [_rss_kib()]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss_kib())
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    start = _rss_kib()
    t0 = time.perf_counter()
    sys.argv = ["harness", "check", "--no-server", "--no-record", *args]
    try:
        runpy.run_module("harness", run_name="__main__")
    except SystemExit:
        pass
    done.set()
    return {
        "peak_mib": peak[0] // 1024,
        "at_start_mib": start // 1024,
        "wall_s": round(time.perf_counter() - t0, 2),
    }


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--self"]:  # one measurement, as JSON on the last line
        print(json.dumps(measure(argv[1:])), flush=True)
        return 0
    base = None
    if argv[:1] == ["--base"]:
        base, argv = argv[1], argv[2:]
    if len(argv) < 2:
        print("usage: parent_memory.py [--base TREE] PROBLEM CANDIDATE [options]", file=sys.stderr)
        return 2
    rows = []
    for name, tree in ([("base", base)] if base else []) + [("this tree", str(ROOT))]:
        env = {**os.environ, "PYTHONPATH": tree}
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--self", *argv],
            cwd=tree, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        last = (done.stdout.strip().splitlines() or ["{}"])[-1]
        row = {"tree": name, **json.loads(last)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
