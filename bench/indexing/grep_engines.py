"""grep's engines on real corpora, this checkout against a baseline tree in the same run:
ripgrep (with the confinement check of every recorded file) and the Python engine (now a
child process killed at the deadline; before, `re` in the process), plus plain rg on the
same files as the floor.

    python bench/indexing/grep_engines.py --index-dir INDEX --baseline-tree OLD_TREE [--corpora triton,cutlass]

OLD_TREE is a folder holding an older `ctxkernel/` and `harness/`, or a git revision of this
repository (read out by bench/baseline.py). Medians of --repeats warm in-process calls,
milliseconds.
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
from typing import Any

# bench.baseline; appended, so a child's ctxkernel is still the one PYTHONPATH puts first
sys.path.append(str(Path(__file__).resolve().parents[2]))
from bench import baseline

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = ["def do_bench", r"make_tiled_copy\(", r"mbarrier\w*wait"]


def child(index: str, corpora: list[str], repeats: int) -> dict[str, Any]:
    from ctxkernel import Workspace

    ws = Workspace(index)
    out: dict[str, Any] = {}
    for corpus in corpora:
        for engine in ("rg", "python"):
            for pattern in PATTERNS:
                times = []
                hits = 0
                for _ in range(repeats):
                    t = time.perf_counter()
                    res = ws.grep(corpus, pattern, engine=engine, max_results=100_000,
                                  time_limit_s=120)  # fmt: skip
                    times.append((time.perf_counter() - t) * 1000)
                    hits = len(res.hits)
                out[f"{corpus}|{engine}|{pattern}"] = (round(statistics.median(times), 1), hits)
    return out


def plain_rg(index: str, corpus: str, pattern: str, repeats: int) -> float:
    from ctxkernel import Workspace
    from ctxkernel.grep import find_rg

    files = [e.local for e in Workspace(index).store.cache(corpus).files().values() if e.local]
    rg = find_rg()
    assert rg
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([rg, "--no-config", "-n", "--with-filename", "-e", pattern, "--", *files],
                       capture_output=True)  # fmt: skip
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--baseline-tree", required=True)
    ap.add_argument("--corpora", default="triton,cutlass")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    corpora = args.corpora.split(",")
    if args.child:
        print(json.dumps(child(args.index_dir, corpora, args.repeats)))
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    rows = {}
    for label, tree in (("baseline", baseline.tree(args.baseline_tree)), ("this checkout", ROOT)):
        proc = baseline.run(
            tree,
            [__file__, "--child", "--index-dir", args.index_dir, "--corpora", args.corpora,
             "--repeats", str(args.repeats), "--baseline-tree", "-"],
            cwd=Path.cwd(), env=env,
        )  # fmt: skip
        rows[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        "| corpus | pattern | plain rg | rg: baseline | rg: now | python: baseline | python: now | blocks |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for corpus in corpora:
        for pattern in PATTERNS:
            floor = plain_rg(args.index_dir, corpus, pattern, args.repeats)
            b, n = rows["baseline"], rows["this checkout"]
            cells = [f"{d[f'{corpus}|{e}|{pattern}'][0]}" for e in ("rg", "python") for d in (b, n)]
            blocks = n[f"{corpus}|rg|{pattern}"][1]
            print(f"| {corpus} | `{pattern}` | {floor} | " + " | ".join(cells) + f" | {blocks} |")


if __name__ == "__main__":
    main()
