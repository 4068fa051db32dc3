"""Docs lookup: resolve a name — a PTX instruction or directive (``wgmma.mma_async``,
``.reqntid``), a Triton API (``tl.dot``, ``triton.testing.do_bench``) or a CuTe/CuTeDSL
name (``cute.make_layout``, ``make_tiled_copy``) — to the section or definition that
documents it, with close alternatives and spelling suggestions.

Exact names are answered from the symbol table (SQLite), without the embedding model.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, field
from typing import Any

from . import symbols
from .corpus import Chunk, Hit
from .store import Store
from .tokenize import tokenize


@dataclass
class DocsResult:
    topic: str
    best: Hit | None
    alternatives: list[Hit] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    took_ms: float = 0.0
    how: str = ""  # "exact", "name", "search", "none"

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "docs",
            "topic": self.topic,
            "found": self.best is not None,
            "how": self.how,
            "best": self.best.to_json() if self.best else None,
            "alternatives": [
                {"id": h.id, "symbol": h.chunk.symbol, "title": h.chunk.title, "url": h.chunk.url}
                for h in self.alternatives
            ],
            "suggestions": self.suggestions,
            "took_ms": round(self.took_ms, 2),
        }


def lookup(
    store: Store, topic: str, corpora: list[str] | None = None, alternatives: int = 5
) -> DocsResult:
    t0 = time.perf_counter()
    names = corpora or store.corpora()
    scored: list[tuple[tuple[Any, ...], Chunk]] = []
    for corpus in names:
        scored.extend(symbols.rank(store.synced_cache(corpus), topic))
    scored.sort(key=lambda s: s[0])
    if scored:
        hits = [
            Hit(c, score=1.0 / (1 + i), rank=i + 1, via="docs")
            for i, (_, c) in enumerate(scored[: alternatives + 1])
        ]
        how = "exact" if scored[0][0][0] == 0 else "name"
        return DocsResult(topic, hits[0], hits[1:], [], (time.perf_counter() - t0) * 1000, how)
    # nothing defines that name: the closest lexical match, and spellings that exist
    best, others = _lexical_fallback(store, names, topic, alternatives)
    suggestions = suggest(store, names, topic)
    how = "search" if best else "none"
    return DocsResult(topic, best, others, suggestions, (time.perf_counter() - t0) * 1000, how)


def _lexical_fallback(
    store: Store, names: list[str], topic: str, n: int
) -> tuple[Hit | None, list[Hit]]:
    from .search import Filters, _lexical

    tokens = tokenize(topic)
    found: list[tuple[int, str, int]] = []
    for corpus in names:
        cache = store.synced_cache(corpus)
        for rank, row in enumerate(_lexical(cache, tokens, n + 1, Filters()).get("head", [])):
            found.append((rank, corpus, row))
    found.sort()
    hits: list[Hit] = []
    for rank, corpus, row in found[: n + 1]:
        chunk = store.cache(corpus).chunks_by_rows([row]).get(row)
        if chunk is not None:
            hits.append(Hit(chunk, score=1.0 / (1 + rank), rank=len(hits) + 1, via="search"))
    return (hits[0] if hits else None), hits[1:]


def suggest(store: Store, corpora: list[str], topic: str, n: int = 5) -> list[str]:
    vocabulary: set[str] = set()
    for corpus in corpora:
        vocabulary.update(store.synced_cache(corpus).defined_names())
    _, name = symbols.split_name(topic)
    pool = sorted(vocabulary)
    found = difflib.get_close_matches(topic, pool, n=n, cutoff=0.75)
    for extra in difflib.get_close_matches(name, pool, n=n, cutoff=0.75):
        if extra not in found:
            found.append(extra)
    return found[:n]
