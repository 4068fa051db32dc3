"""Probe (issue 31): do contextual vectors of the teaching material find how-to answers?

A transformer on every chunk costs ~10x the 60 s indexing budget (bench/RESULTS.md,
issue 17), but the teaching material (docs and tutorial chunks) is about a tenth of the
chunks. This probe embeds only those with the offline MiniLM (``minilm`` embedder: path
words, section title and the first 1,500 characters), embeds the question with MiniLM too,
and adds the nearest teaching chunks as one more list to the fusion (``--weights``: its
weight; 0 is the search as it ships). Nothing ships; it prints R@10 / MRR@10 per set and
group and the added list's cost per question.

  python bench/retrieval/teaching_dense_probe.py --index-dir INDEX \\
      --set rdev=bench/queries/real-users-dev.jsonl --set edev=bench/queries/eval-dev.jsonl \\
      --set dev=bench/queries/dev.jsonl --weights 0,0.5,1,2 [--kinds doc,tutorial] [--howto-only]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def teaching_chunks(index_dir: Path, kinds: tuple[str, ...]) -> tuple[list, list[str]]:
    """((corpus, row) keys, texts to embed) of every chunk of these kinds."""
    keys: list[tuple[str, int]] = []
    texts: list[str] = []
    marks = ",".join("?" * len(kinds))
    for corpus_dir in sorted((index_dir / "lexical").iterdir()):
        db = sqlite3.connect(f"file:{corpus_dir / 'meta.sqlite'}?mode=ro", uri=True)
        query = f"SELECT row, path, title, text FROM chunks WHERE kind IN ({marks})"
        for row, path, title, text in db.execute(query, kinds):
            stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            words = stem.replace("_", " ").replace("-", " ")
            keys.append((corpus_dir.name, int(row)))
            texts.append(f"{words}. {title or ''}. {' '.join((text or '').split())[:1500]}")
        db.close()
    return keys, texts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index-dir", required=True, type=Path)
    ap.add_argument("--set", action="append", default=[], help="NAME=PATH (repeatable)")
    ap.add_argument("--weights", default="0,0.5,1,2")
    ap.add_argument("--kinds", default="doc,tutorial")
    ap.add_argument("--depth", type=int, default=60)
    ap.add_argument("--howto-only", action="store_true", help="only questions asking how")
    args = ap.parse_args()

    import numpy as np

    import ctxkernel.search as search
    from ctxkernel import querytext
    from ctxkernel.cli.evaluate import eval_cmd
    from ctxkernel.embedders.embed import get_embedder

    minilm = get_embedder("minilm")
    keys, texts = teaching_chunks(args.index_dir, tuple(args.kinds.split(",")))
    t0 = time.perf_counter()
    matrix = np.asarray(minilm.embed(texts), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-9
    print(
        f"{len(keys)} chunks ({args.kinds}) embedded in {time.perf_counter() - t0:.0f} s",
        file=sys.stderr,
    )
    corpus_of = np.array([c for c, _ in keys])
    state: dict[str, Any] = {"w": 0.0, "query": None, "names": set()}
    cost: list[float] = []
    plain_search, plain_rrf = search.Searcher.search, search._rrf

    def remembering(self: Any, query: str, *a: Any, **kw: Any) -> Any:
        state["query"] = query
        state["names"] = set(self._corpora(a[0] if a else kw.get("corpora")))
        return plain_search(self, query, *a, **kw)

    def with_teaching(lists: list, sharp: list | None = None) -> Any:
        query = state["query"]
        wanted = query and not querytext.error_message(query)
        if state["w"] and wanted and (not args.howto_only or querytext.asks_how(query)):
            started = time.perf_counter()
            vector = np.asarray(minilm.embed_query(query), dtype=np.float32)
            sims = matrix @ (vector / (np.linalg.norm(vector) + 1e-9))
            sims = np.where(np.isin(corpus_of, list(state["names"])), sims, -9.0)
            top = np.argsort(-sims)[: args.depth]
            cost.append((time.perf_counter() - started) * 1000)
            lists = [*lists, (state["w"], [keys[i] for i in top])]
        return plain_rrf(lists, sharp)

    search.Searcher.search = remembering  # type: ignore[method-assign]
    search._rrf = with_teaching
    weights = [float(w) for w in args.weights.split(",")]
    summary: dict[str, dict[float, tuple[float, float]]] = {}
    for w in weights:
        state["w"] = w
        cost.clear()
        argv = [*args.set, "--index-dir", str(args.index_dir), "--modes", "hybrid"]
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            eval_cmd.main([*argv, "--by", "kind", "--json"], standalone_mode=False)
        for line in buf.getvalue().splitlines():
            rec = json.loads(line)
            if rec.get("type") == "eval":
                key = f"{rec['set']} {rec['mode']} {rec['group']}"
                summary.setdefault(key, {})[w] = (rec["recall@10"], rec["mrr@10"])
        if cost:
            cost.sort()
            print(
                f"w {w}: the added list p50 {cost[len(cost) // 2]:.1f} ms over "
                f"{len(cost)} questions",
                file=sys.stderr,
            )
    print("| set mode group | " + " | ".join(f"w {w}" for w in weights) + " |")
    print("|---" * (len(weights) + 1) + "|")
    for key, by_w in summary.items():
        print(f"| {key} | " + " | ".join(f"{r:.3f} / {m:.3f}" for r, m in by_w.values()) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
