"""Docs lookup: resolve a name — a PTX instruction or directive (``wgmma.mma_async``,
``.reqntid``), a Triton API (``tl.dot``, ``triton.testing.do_bench``) or a CuTe/CuTeDSL
name (``cute.make_layout``, ``make_tiled_copy``) — to the section or definition that
documents it, with close alternatives and spelling suggestions.

Exact names are answered from the symbol table (SQLite), without the embedding model.
"""

from __future__ import annotations

import difflib
import re
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
    hint: str = ""  # what would answer better (a corpus to index), or ""
    links: list[Any] = field(default_factory=list)  # links.resolve.Link: implemented by / used in
    links_total: int = 0
    arch: str = ""  # the target the answer was filtered for, or ""

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
            "hint": self.hint,
            "links": [link.to_json() for link in self.links],
            "links_total": self.links_total,
            "arch": self.arch,
            "took_ms": round(self.took_ms, 2),
        }


def ptx_hint(store: Store, topic: str, searched: list[str]) -> str:
    """Advice to index the ``ptx`` corpus, for a PTX name looked up where it is not indexed."""
    from .corpus import load_corpora

    t = topic.strip()
    if not symbols.looks_ptx(t) or "ptx" in searched or "ptx" in store.corpora():
        return ""
    if "ptx" not in load_corpora():
        return ""
    return (
        f"{t} is a PTX name: the PTX ISA is the ptx corpus, which is not indexed; "
        "index it with `ctxkernel index ptx` (or --source a saved copy of the page)"
    )


def lookup(
    store: Store,
    topic: str,
    corpora: list[str] | None = None,
    alternatives: int = 5,
    *,
    explicit: bool = False,
) -> DocsResult:
    """The best definition or section of ``topic`` in ``corpora`` (default: all indexed);
    ``explicit`` when the caller chose the corpora (then no advice about other ones).

    A PTX name looked up where the ptx corpus is not indexed has no answer: only the PTX
    ISA documents an instruction, and what the other corpora hold (a wrapper, a function
    that shares a word with it) is listed as an alternative under the advice to index
    ptx, never presented as the instruction's documentation."""
    hint = "" if explicit else ptx_hint(store, topic, corpora or store.corpora())
    if not hint:
        return _lookup(store, topic, corpora, alternatives)
    # more candidates than shown: those that do not spell the name are dropped
    result = _lookup(store, topic, corpora, alternatives * 4)
    found = [result.best] if result.best is not None else []
    spelled = _spelling(topic)
    kept = [h for h in [*found, *result.alternatives] if spelled.search(_said(h.chunk))]
    for i, hit in enumerate(kept[:alternatives], 1):
        hit.rank = i
    result.best, result.alternatives, result.how = None, kept[:alternatives], "none"
    result.hint = hint
    return result


def _spelling(topic: str) -> re.Pattern[str]:
    """The name as code spells it too: ``mma.sync`` in an asm string, ``mma_sync`` as a
    wrapper's name (a ``sync`` or an ``MMA`` alone is another thing)."""
    parts = [re.escape(p) for p in topic.strip().lstrip(".").split(".") if p]
    return re.compile(r"(?<![A-Za-z0-9])" + "[._]".join(parts) + r"(?![A-Za-z0-9])", re.I)


def _said(chunk: Chunk) -> str:
    return "\n".join((chunk.symbol, chunk.title, *chunk.defines, chunk.text))


def _lookup(
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
        how = "exact" if symbols.is_exact(scored[0][0]) else "name"
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
