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

from .corpus import Chunk, Hit
from .store import Store
from .tokenize import tokenize

# Module aliases people and agents write, and the path fragments that hold them.
ALIASES: dict[str, tuple[str, ...]] = {
    "tl": ("triton/language",),
    "triton.language": ("triton/language",),
    "triton.testing": ("triton/testing",),
    "triton": ("triton/",),
    "gl": ("gluon",),
    "ttgl": ("gluon",),
    "cute": ("cute",),
    "cutlass.cute": ("cute",),
    "cutlass": ("cutlass",),
    "cute.nvgpu": ("cute/nvgpu",),
    "cpasync": ("cpasync",),
    "warpgroup": ("warpgroup",),
}

_KIND_RANK = {"doc": 0, "source": 1, "tutorial": 3, "example": 4, "test": 5}


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


def _split(topic: str) -> tuple[str, str]:
    """(qualifier, name): ``tl.dot`` -> (``tl``, ``dot``); ``wgmma.mma_async`` stays whole too."""
    t = topic.strip().rstrip("()").replace("::", ".")
    if t.startswith(".") or "." not in t:
        return "", t
    qual, _, name = t.rpartition(".")
    return qual, name


def _candidates(topic: str) -> list[tuple[str, str, int]]:
    """(name to look up, qualifier it must sit under, priority) — lower priority first."""
    t = topic.strip().rstrip("()").replace("::", ".")
    out = [(t, "", 0)]
    qual, name = _split(t)
    if qual:
        out.append((name, qual, 1))
    if not t.startswith(".") and t.lower() != t:
        out.append((t.lower(), "", 2))
    return out


def _score(
    chunk: Chunk, looked_up: str, topic: str, qualifier: str, priority: int, exact_case: bool
) -> tuple[Any, ...]:
    fragments = ALIASES.get(qualifier, (qualifier.replace(".", "/"),)) if qualifier else ()
    under_qualifier = 0 if not fragments or any(f in chunk.path for f in fragments) else 1
    # the section whose title ends with the name is the instruction's own section
    title_match = 0 if chunk.title.rstrip().lower().endswith(looked_up.lower()) else 1
    return (
        priority,
        under_qualifier,
        0 if exact_case else 1,
        title_match if chunk.kind == "doc" else 0,
        _KIND_RANK.get(chunk.kind, 6),
        0 if chunk.doc else 1,
        chunk.path.count("/"),
        chunk.path,
        chunk.start_line,
    )


def lookup(
    store: Store, topic: str, corpora: list[str] | None = None, alternatives: int = 5
) -> DocsResult:
    t0 = time.perf_counter()
    names = corpora or store.corpora()
    scored: list[tuple[tuple[Any, ...], Chunk]] = []
    for corpus in names:
        cache = store.synced_cache(corpus)
        rows: dict[int, tuple[Any, ...]] = {}
        for looked_up, qualifier, priority in _candidates(topic):
            for row, defined in cache.defined(looked_up):
                rows.setdefault(row, (looked_up, qualifier, priority, defined == looked_up))
        chunks = cache.chunks_by_rows(list(rows))
        for row, (looked_up, qualifier, priority, exact) in rows.items():
            chunk = chunks.get(row)
            if chunk is not None:
                scored.append((_score(chunk, looked_up, topic, qualifier, priority, exact), chunk))
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
    _, name = _split(topic)
    pool = sorted(vocabulary)
    found = difflib.get_close_matches(topic, pool, n=n, cutoff=0.75)
    for extra in difflib.get_close_matches(name, pool, n=n, cutoff=0.75):
        if extra not in found:
            found.append(extra)
    return found[:n]
