"""What the worker's sandbox (harness/process/sandbox.py) adds to a check's wall time on CPU.

    python bench/harness/isolation_overhead.py --baseline-tree DIR [--rounds 4] [--checks 3] [--per-mode]

DIR is a folder holding the harness from before the sandbox, or a git revision of this
repository (read out by ``bench/baseline.py``). Configurations: ``baseline`` (that tree), and this tree in each mode it
can use (``CTXKERNEL_ISOLATION=userns``, ``pidns``, ``none``). Each configuration runs in
its own process (torch imported once there): one warm-up check, then ``--checks`` timed
checks of ``examples/vector_add/solution_triton.py`` (one small shape, Triton
interpreter, no record). Rounds interleave the configurations so the machine's load
falls on them alike. A second table times the launch alone (``--launch-only``: just
that): ``/bin/true`` started directly and through the launcher in each mode, and the
probe each process runs once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2]))  # bench.baseline
from bench import baseline

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, time
from harness.runner import LocalRunner, RunOptions, check
opts = RunOptions(device="cpu", trials=2, shapes=[{"n": 1000}], record=False)
def one():
    t = time.perf_counter()
    v = check("examples/vector_add", "examples/vector_add/solution_triton.py", opts, LocalRunner())
    assert v.ok, v.lines()
    return time.perf_counter() - t
one()
print(json.dumps([one() for _ in range(int(sys.argv[1]))]))
"""


def run_config(tree: Path, mode: str | None, checks: int) -> list[float]:
    env = dict(os.environ, TRITON_DEFAULT_FP_FUSION="1")
    env.pop("CTXKERNEL_ISOLATION", None)
    if mode:
        env["CTXKERNEL_ISOLATION"] = mode
    done = baseline.run(tree, ["-c", CHILD, str(checks)], env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode or 'baseline'} failed: {done.stderr[-2000:]}")
    times: list[float] = json.loads(done.stdout.strip().splitlines()[-1])
    return times


def launch_times(rounds: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT))
    from harness.process import sandbox

    available = sandbox.probe()[0]
    out: dict[str, list[float]] = {"direct": []}
    for _ in range(rounds):
        for mode in ("direct", *available, "none"):
            r, w = os.pipe()
            argv = ["/bin/true"]
            cmd = argv if mode == "direct" else sandbox.command(mode, argv, w)
            t = time.perf_counter()
            subprocess.run(cmd, pass_fds=(w,), check=True)
            out.setdefault(mode, []).append(time.perf_counter() - t)
            os.close(w)
            os.close(r)
    return {m: statistics.median(v) for m, v in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline-tree", required=True, help="a tree (a folder) or a git revision"
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--checks", type=int, default=3)
    parser.add_argument("--launch-only", action="store_true", help="only the launch table")
    parser.add_argument(
        "--per-mode",
        action="store_true",
        help="run the baseline tree in each mode too (a baseline that has the sandbox)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from harness.process import sandbox

    if args.launch_only:
        print_launch()
        return 0
    old_tree = baseline.tree(args.baseline_tree)

    modes = [*sandbox.probe()[0], "none"]
    configs: list[tuple[str, Path, str | None]] = []
    if args.per_mode:  # the baseline tree in each mode too: like against like
        for m in modes:
            configs += [(f"baseline {m}", old_tree, m), (f"this tree {m}", ROOT, m)]
    else:
        configs = [("baseline", old_tree, None)] + [(m, ROOT, m) for m in modes]
    times: dict[str, list[float]] = {name: [] for name, _, _ in configs}
    for round_ in range(args.rounds):
        for name, tree, mode in configs:
            got = run_config(tree, mode, args.checks)
            times[name].extend(got)
            print(f"round {round_ + 1} {name}: {' '.join(f'{t:.3f}' for t in got)}", flush=True)
    print("\n| configuration | median check wall time | vs its baseline | checks |")
    print("|---|---|---|---|")
    for name, values in times.items():
        med = statistics.median(values)
        mode = name.split()[-1]
        ref = times.get(f"baseline {mode}") if args.per_mode else times["baseline"]
        base = statistics.median(ref or values)
        print(f"| {name} | {med:.3f} s | {med - base:+.3f} s ({med / base:.3f}x) | {len(values)} |")
    print_launch()
    return 0


def print_launch() -> None:
    from harness.process import sandbox

    probes = []
    for _ in range(5):
        t = time.perf_counter()
        sandbox.probe()
        probes.append(time.perf_counter() - t)
    launch = launch_times(20)
    print("\n| launch of /bin/true | median |")
    print("|---|---|")
    for name, value in launch.items():
        print(f"| {name} | {value * 1000:.1f} ms |")
    print(f"| probe (once per process) | {statistics.median(probes) * 1000:.1f} ms |")


if __name__ == "__main__":
    sys.exit(main())
