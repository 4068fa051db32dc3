"""Retrieval evaluation: run judged queries through the searcher and score the ranking.

Queries are JSON Lines::

    {"query": "how do I partition a tensor across threads with a tiled copy",
     "corpus": "cutlass", "kind": "howto",
     "relevant": ["python/CuTeDSL/cutlass/cute/atom.py#make_tiled_copy",
                  "media/docs/cpp/cute/0t_mma_atom.md"]}

A target is ``path`` (any chunk of the file), ``path#name`` (a chunk of the file that
defines or is titled ``name``) or ``path:START-END`` (a chunk overlapping those lines);
``path`` may be a glob. A query's targets are alternatives: each is an acceptable answer.

Metrics per mode, overall, per corpus and per query kind: Recall@k (share of queries with
an acceptable answer in the top k), MRR@10, nDCG@10 (binary gain, each target counted
once), and search latency p50/p95.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus import Hit
from .errors import UserError
from .workspace import Workspace

KS = (1, 5, 10)
_RANGE = re.compile(r"^(?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$")


@dataclass(frozen=True)
class Target:
    path: str
    name: str = ""
    start: int = 0
    end: int = 0

    @classmethod
    def parse(cls, text: str) -> Target:
        if "#" in text:
            path, name = text.split("#", 1)
            return cls(path, name=name)
        m = _RANGE.match(text)
        if m:
            return cls(m["path"], start=int(m["start"]), end=int(m["end"]))
        return cls(text)

    def matches(self, hit: Hit) -> bool:
        c = hit.chunk
        if not (c.path == self.path or fnmatch.fnmatchcase(c.path, self.path)):
            return False
        if self.name:
            names = {
                c.symbol,
                c.symbol.rsplit(".", 1)[-1],
                c.symbol.rsplit("::", 1)[-1],
                *c.defines,
            }
            return self.name in names or self.name in c.title
        if self.start:
            return c.start_line <= self.end and self.start <= c.end_line
        return True


@dataclass
class Query:
    query: str
    corpus: str
    kind: str
    targets: list[Target]
    id: str = ""


@dataclass
class QueryResult:
    query: Query
    mode: str
    first_rank: int  # 0 when no acceptable answer in the top 10
    ndcg: float
    latency_ms: float
    top: list[str] = field(default_factory=list)


def load_queries(path: Path) -> list[Query]:
    if not path.is_file():
        raise UserError(f"{path}: no such query file")
    out: list[Query] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            row = json.loads(line)
            out.append(
                Query(
                    query=row["query"],
                    corpus=row["corpus"],
                    kind=row.get("kind", "other"),
                    targets=[Target.parse(t) for t in row["relevant"]],
                    id=row.get("id", f"q{n}"),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise UserError(
                f"{path.name}:{n}: bad query line ({exc}); need query, corpus, relevant"
            ) from None
    if not out:
        raise UserError(f"{path}: no queries")
    return out


def score(hits: Sequence[Hit], targets: Sequence[Target], k: int = 10) -> tuple[int, float]:
    """(rank of the first acceptable hit or 0, nDCG@k)."""
    first = 0
    found: set[int] = set()
    dcg = 0.0
    for rank, hit in enumerate(hits[:k], 1):
        matched = [i for i, t in enumerate(targets) if t.matches(hit)]
        if matched and not first:
            first = rank
        new = [i for i in matched if i not in found]
        if new:
            found.add(new[0])
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(len(targets), k) + 1))
    return first, (dcg / ideal if ideal else 0.0)


def run(
    ws: Workspace,
    queries: Iterable[Query],
    modes: Sequence[str] = ("hybrid", "lexical", "dense"),
    k: int = 10,
) -> list[QueryResult]:
    results: list[QueryResult] = []
    indexed = set(ws.store.corpora())
    queries = [q for q in queries if q.corpus in indexed]
    if not queries:
        raise UserError("none of the queries' corpora is indexed")
    # warm the model and caches so latency measures warm searches
    ws.search(queries[0].query, corpora=[queries[0].corpus], k=k)
    for mode in modes:
        for q in queries:
            t = time.perf_counter()
            hits = ws.search(q.query, corpora=[q.corpus], k=k, mode=mode).hits
            latency = (time.perf_counter() - t) * 1000
            first, ndcg = score(hits, q.targets, k)
            results.append(QueryResult(q, mode, first, ndcg, latency, [h.id for h in hits[:3]]))
    return results


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    pos = (len(values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def summarize(results: Sequence[QueryResult]) -> list[dict[str, Any]]:
    """One row per (mode, group): group "all", "corpus=NAME" and "kind=NAME"."""
    rows: list[dict[str, Any]] = []
    modes = list(dict.fromkeys(r.mode for r in results))
    for mode in modes:
        mine = [r for r in results if r.mode == mode]
        groups: dict[str, list[QueryResult]] = {"all": mine}
        for r in mine:
            groups.setdefault(f"corpus={r.query.corpus}", []).append(r)
            groups.setdefault(f"kind={r.query.kind}", []).append(r)
        for group, rs in groups.items():
            n = len(rs)
            row: dict[str, Any] = {"type": "eval", "mode": mode, "group": group, "n": n}
            for kk in KS:
                row[f"recall@{kk}"] = round(sum(1 for r in rs if 0 < r.first_rank <= kk) / n, 3)
            row["mrr@10"] = round(sum(1.0 / r.first_rank for r in rs if r.first_rank) / n, 3)
            row["ndcg@10"] = round(sum(r.ndcg for r in rs) / n, 3)
            lat = [r.latency_ms for r in rs]
            row["p50_ms"] = round(_pct(lat, 0.5), 1)
            row["p95_ms"] = round(_pct(lat, 0.95), 1)
            rows.append(row)
    return rows


def misses(results: Sequence[QueryResult], mode: str = "hybrid") -> list[dict[str, Any]]:
    return [
        {
            "type": "miss",
            "mode": r.mode,
            "id": r.query.id,
            "query": r.query.query,
            "rank": r.first_rank,
            "top": r.top,
        }
        for r in results
        if r.mode == mode and r.first_rank != 1
    ]
