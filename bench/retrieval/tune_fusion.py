"""Grid over the fusion weights on a judged query set, one process, one index.

usage: CTXKERNEL_HOME=... python bench/retrieval/tune_fusion.py bench/queries/dev.jsonl

Prints MRR@10 and Recall@10 per weight setting, best first. A coarse grid on purpose:
the dev set has ~50 queries, and fine tuning would fit its noise.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ctxkernel import Workspace
from ctxkernel.evaluate import load_queries, score
from ctxkernel.search import Weights


def main(path: str) -> None:
    ws = Workspace()
    queries = [q for q in load_queries(Path(path)) if q.corpus in ws.store.corpora()]
    grid = {
        "body": [0.5, 1.0],
        "head": [0.5, 1.0],
        "file": [0.5, 1.0, 1.5],
        "dense": [0.5, 1.0, 1.5],
        "head_in_prose": [0.25, 0.5, 1.0],
    }
    ws.search(queries[0].query, corpora=[queries[0].corpus])  # warm
    # embed each query once: the grid only changes fusion
    embedder = ws.embedder
    memo: dict[str, object] = {}
    real = embedder.embed_query

    def cached(query: str) -> object:
        if query not in memo:
            memo[query] = real(query)
        return memo[query]

    embedder.embed_query = cached  # type: ignore[method-assign,assignment]
    rows = []
    for values in itertools.product(*grid.values()):
        w = Weights(**dict(zip(grid, values, strict=True)))
        ws.searcher.weights = w
        mrr = r10 = 0.0
        for q in queries:
            first, _ = score(ws.search(q.query, corpora=[q.corpus], k=10).hits, q.targets)
            mrr += 1 / first if first else 0
            r10 += 1 if first else 0
        rows.append((mrr / len(queries), r10 / len(queries), dict(zip(grid, values, strict=True))))
    rows.sort(key=lambda r: (-r[0], -r[1]))
    for mrr, r10, w in rows[:15]:
        print(f"MRR {mrr:.3f}  R@10 {r10:.3f}  {w}")
    default = Weights()
    print("default:", default)


if __name__ == "__main__":
    main(sys.argv[1])
