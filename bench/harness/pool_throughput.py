"""Pool throughput: candidates checked per minute with the local pool on one GPU vs two.

Runs from a checkout with no install (``python3 bench/harness/pool_throughput.py``): the same set
of honest Triton candidates (``--copies`` distinct copies of each example's
``solution_triton.py``; a batch checks identical content once, so each copy differs by a
comment) goes through ``PoolRunner`` pinned to GPU 0, then to GPUs 0 and 1, one slot per
GPU by default. Slots are started and warmed with one check each before the clock starts.
Every check is a full ladder (pre-checks, compile, run, correctness, anti-cheat) in its
own isolated worker; the Triton cache is per check, so each one compiles from scratch.

Prints a table and one JSON document (``--out FILE`` writes it too): per configuration
the wall time, candidates per minute, mean seconds per check, the peak number of checks
running at once, the checks per GPU, and whether every verdict passed.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.problems.candidate import Candidate, load_candidate  # noqa: E402
from harness.problems.problem import Problem, load_problem  # noqa: E402
from harness.runner import RunOptions  # noqa: E402
from harness.runners.pool import PoolEvent, PoolRunner, visible_gpus  # noqa: E402


class Concurrency:
    """The peak number of checks in flight, from the pool's events."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[tuple[int, int]] = set()
        self.peak = 0

    def __call__(self, event: PoolEvent) -> None:
        if event.job is None:
            return
        key = (event.slot, event.job.index)
        with self.lock:
            if event.kind == "started":
                self.running.add(key)
                self.peak = max(self.peak, len(self.running))
            elif event.kind in ("finished", "lost"):
                self.running.discard(key)


def make_candidates(
    problems: list[Problem], copies: int, workdir: Path, tag: str
) -> list[tuple[Problem, Candidate]]:
    out: list[tuple[Problem, Candidate]] = []
    for problem in problems:
        source = (problem.path / "solution_triton.py").read_text()
        folder = workdir / f"{problem.name}-{tag}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(copies):
            path = folder / f"honest_{i}.py"
            path.write_text(source + f"\n# {tag} copy {i}\n")
            out.append((problem, load_candidate(path, problem)))
    return out


def median_rung_seconds(verdicts: list[Any]) -> dict[str, float]:
    """Each rung's median seconds over the verdicts (where a slowed-down check lost time)."""
    seen: dict[str, list[float]] = {}
    for verdict in verdicts:
        for name, seconds in (verdict.environment.get("rung_s") or {}).items():
            seen.setdefault(name, []).append(float(seconds))
        for rung in verdict.rungs:  # the rung's own split, where it keeps one
            for phase, seconds in (rung.details.get("phase_s") or {}).items():
                seen.setdefault(f"{rung.name}/{phase}", []).append(float(seconds))
    return {name: round(statistics.median(values), 3) for name, values in seen.items()}


def measure(
    gpus: list[str],
    slots_per_gpu: int,
    problems: list[Problem],
    copies: int,
    options: RunOptions,
    workdir: Path,
) -> dict[str, Any]:
    label = f"{len(gpus)} GPU" + ("s" if len(gpus) > 1 else "")
    concurrency = Concurrency()
    jobs = len(gpus) * slots_per_gpu
    with PoolRunner(jobs=jobs, gpus=gpus, on_event=concurrency) as pool:
        # warm-up: start every slot (torch import, CUDA context) with one check each
        warm = make_candidates(problems[:1], jobs, workdir, f"warm-{len(gpus)}")
        started = time.monotonic()
        for _ in pool.run_many(problems[0], [c for _, c in warm], options):
            pass
        warm_s = time.monotonic() - started
        print(f"[{label}] {jobs} slot(s) warm in {warm_s:.1f} s", file=sys.stderr, flush=True)
        concurrency.peak = 0
        batch = make_candidates(problems, copies, workdir, f"run-{len(gpus)}")
        verdicts = []
        started = time.monotonic()
        # one problem at a time would leave slots idle at each switch: feed them all at once
        threads = []
        results: list[Any] = []
        lock = threading.Lock()

        def run(problem: Problem) -> None:
            mine = [c for p, c in batch if p is problem]
            for candidate, verdict in pool.run_many(problem, mine, options):
                with lock:
                    results.append((candidate, verdict))
                    done = len(results)
                print(
                    f"[{label}] {done}/{len(batch)} {problem.name}/{candidate.path.name}: "
                    f"{'PASSED' if verdict.ok else 'FAILED ' + verdict.reason[:80]} "
                    f"(GPU {verdict.environment.get('runner', {}).get('gpu')}, {verdict.wall_s:.1f} s)",
                    file=sys.stderr,
                    flush=True,
                )

        for problem in problems:
            thread = threading.Thread(target=run, args=(problem,))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        wall = time.monotonic() - started
        verdicts = [v for _, v in results]
    per_gpu: dict[str, int] = {}
    for verdict in verdicts:
        gpu = str(verdict.environment.get("runner", {}).get("gpu"))
        per_gpu[gpu] = per_gpu.get(gpu, 0) + 1
    return {
        "config": label,
        "gpus": gpus,
        "slots": jobs,
        "candidates": len(verdicts),
        "wall_s": round(wall, 2),
        "candidates_per_min": round(len(verdicts) / wall * 60.0, 2),
        "mean_check_s": round(sum(v.wall_s for v in verdicts) / max(1, len(verdicts)), 2),
        "peak_concurrent": concurrency.peak,
        "per_gpu": per_gpu,
        "all_passed": all(v.ok for v in verdicts),
        "median_rung_s": median_rung_seconds(verdicts),
        "failed": [v.reason for v in verdicts if not v.ok][:5],
        "warmup_s": round(warm_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=["vector_add", "softmax"])
    parser.add_argument("--copies", type=int, default=8, help="candidates per problem")
    parser.add_argument("--gpus", default=None, help="the two GPUs to use, e.g. 0,1")
    parser.add_argument("--slots-per-gpu", type=int, default=1)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    parser.add_argument(
        "--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a smoke test of this script"
    )
    args = parser.parse_args(argv)

    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "pool_throughput: needs CUDA GPUs (or --device cpu for a smoke test)", file=sys.stderr
        )
        return 2
    if args.device == "cpu":
        gpus = ["cpu", "cpu"]  # CPU slots: the same two configurations, no GPU pinned
    else:
        gpus = args.gpus.split(",") if args.gpus else visible_gpus()
    problems = [load_problem(REPO / "examples" / name) for name in args.problems]
    workdir = Path(tempfile.mkdtemp(prefix="ctxkernel-pool-bench-"))
    options = RunOptions(device=args.device, trials=args.trials, runs_dir=workdir / "runs")
    rows = []
    try:
        configs = [gpus[:1]] + ([gpus[:2]] if len(gpus) >= 2 else [])
        for chosen in configs:
            rows.append(
                measure(chosen, args.slots_per_gpu, problems, args.copies, options, workdir)
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    import triton

    doc = {
        "type": "pool_throughput",
        "date": time.strftime("%Y-%m-%d"),
        "host": platform.node(),
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        "gpu_count": torch.cuda.device_count() if args.device == "cuda" else 0,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "problems": args.problems,
        "copies": args.copies,
        "trials": args.trials,
        "rows": rows,
    }
    if len(rows) == 2:
        doc["speedup_2_vs_1"] = round(
            rows[1]["candidates_per_min"] / rows[0]["candidates_per_min"], 2
        )
    header = f"{'config':<8} {'slots':>5} {'cands':>5} {'wall s':>8} {'cand/min':>9} {'mean check s':>12} {'peak':>4}  per GPU        passed"
    print(header)
    for row in rows:
        per_gpu = " ".join(f"{k}:{v}" for k, v in sorted(row["per_gpu"].items()))
        print(
            f"{row['config']:<8} {row['slots']:>5} {row['candidates']:>5} {row['wall_s']:>8.1f} "
            f"{row['candidates_per_min']:>9.1f} {row['mean_check_s']:>12.2f} {row['peak_concurrent']:>4}  "
            f"{per_gpu:<14} {row['all_passed']}"
        )
    if "speedup_2_vs_1" in doc:
        print(f"two GPUs vs one: {doc['speedup_2_vs_1']:.2f}x candidates per minute")
    print(json.dumps(doc))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if all(r["all_passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
