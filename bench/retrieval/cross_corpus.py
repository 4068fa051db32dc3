"""Search over all corpora at once: the dev queries (bench/queries/dev.jsonl) searched with
no corpus filter, scored against their judgments (a hit must come from the query's own
corpus), for this checkout and for a baseline tree in the same run.

The dev set's `ctxkernel eval` searches each query in its own corpus only, so it does not
see how the corpora are merged; this does. Optionally a tiny corpus (two short notes that
say "make", "tiled" and "copy") is indexed beside them first, the case of the bug report.

    python bench/retrieval/cross_corpus.py --index-dir INDEX --baseline-tree OLD_TREE [--tiny]

OLD_TREE is a folder holding an older `ctxkernel/` and `harness/`, or a git revision of this
repository (read out by bench/baseline.py). INDEX is copied first; the copy is searched.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# bench.baseline; appended, so a child's ctxkernel is still the one PYTHONPATH puts first
sys.path.append(str(Path(__file__).resolve().parents[2]))
from bench import baseline

ROOT = Path(__file__).resolve().parents[2]
NOTES = {
    "notes.md": "# Notes\n\nHow to make a copy of a tiled layout: make the copy first, then tile it.\n",
    "todo.md": "# Todo\n\nMake the tiled kernels faster; copy less.\n",
}


def child(index: str, queries: str, modes: list[str]) -> dict[str, Any]:
    from ctxkernel import Workspace
    from ctxkernel.evaluate import load_queries, score

    ws = Workspace(index)
    qs = [q for q in load_queries(Path(queries)) if q.corpus in ws.store.corpora()]
    ws.search(qs[0].query, k=10)  # warm
    out: dict[str, Any] = {}
    for mode in modes:
        firsts, own5, lat = [], [], []
        for q in qs:
            t = time.perf_counter()
            hits = ws.search(q.query, k=10, mode=mode).hits
            lat.append((time.perf_counter() - t) * 1000)
            mine = [h if h.chunk.corpus == q.corpus else None for h in hits]
            first = 0
            for rank, h in enumerate(mine, 1):
                if h is not None and score([h], q.targets, 1)[0]:
                    first = rank
                    break
            firsts.append(first)
            own5.append(
                sum(1 for h in hits[:5] if h.chunk.corpus == q.corpus) / max(1, len(hits[:5]))
            )
        out[mode] = {
            "queries": len(qs),
            "R@1": round(sum(1 for f in firsts if f == 1) / len(qs), 3),
            "R@5": round(sum(1 for f in firsts if 0 < f <= 5) / len(qs), 3),
            "MRR@10": round(sum(1 / f for f in firsts if f) / len(qs), 3),
            "own_corpus_top5": round(statistics.mean(own5), 3),
            "p50_ms": round(statistics.median(lat), 1),
        }
    probe = ws.search("make_tiled_copy", k=1, mode="lexical").hits
    out["make_tiled_copy_top1"] = probe[0].id if probe else ""
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--baseline-tree", required=True)
    ap.add_argument("--queries", default=str(ROOT / "bench/queries/dev.jsonl"))
    ap.add_argument("--modes", default="lexical,hybrid")
    ap.add_argument("--tiny", action="store_true", help="index the two-note corpus beside them")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    modes = args.modes.split(",")
    if args.child:
        print(json.dumps(child(args.index_dir, args.queries, modes)))
        return
    work = Path(tempfile.mkdtemp(prefix="ck-cross-"))
    index = work / "index"
    shutil.copytree(args.index_dir, index)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CTXKERNEL_HOME": str(work / "home")}
    if args.tiny:
        (work / "home" / "corpora").mkdir(parents=True)
        (work / "home" / "corpora" / "notes.toml").write_text(
            'name = "notes"\ndescription = "two notes"\n[source]\ngit = "https://example.invalid/n.git"\n'
        )
        (work / "notes").mkdir()
        for name, text in NOTES.items():
            (work / "notes" / name).write_text(text)
        baseline.run(
            ROOT,
            ["-m", "ctxkernel", "index", "notes", "--source", str(work / "notes"),
             "--index-dir", str(index)],
            env=env,
        )  # fmt: skip
    rows = {}
    for label, tree in (("baseline", baseline.tree(args.baseline_tree)), ("this checkout", ROOT)):
        proc = baseline.run(
            tree,
            [__file__, "--child", "--index-dir", str(index), "--queries", args.queries,
             "--modes", args.modes, "--baseline-tree", "-"],
            cwd=Path.cwd(), env=env,
        )  # fmt: skip
        rows[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    print("| tree | mode | R@1 | R@5 | MRR@10 | own corpus in top 5 | p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for label, res in rows.items():
        for mode in modes:
            r = res[mode]
            print(f"| {label} | {mode} | {r['R@1']} | {r['R@5']} | {r['MRR@10']} | "
                  f"{r['own_corpus_top5']} | {r['p50_ms']} |")  # fmt: skip
    for label, res in rows.items():
        print(
            f"{label}: `search make_tiled_copy --mode lexical -k 1` -> {res['make_tiled_copy_top1']}"
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
