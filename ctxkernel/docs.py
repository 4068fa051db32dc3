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
    hint: str = ""  # what would answer better (a corpus to index), or ""
    links: list[Any] = field(default_factory=list)  # links.Link: implemented by / used in
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


# First parts of PTX instruction names (``wgmma.mma_async`` -> ``wgmma``); with directives
# (``.reqntid``) they say a topic is documented by the PTX ISA, i.e. the ``ptx`` corpus.
PTX_OPCODES = frozenset(
    """abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind
    bmsk bra brev brkpt brx call clusterlaunchcontrol clz cnot copysign cos cp
    createpolicy cvt cvta discard div dp2a dp4a elect ex2 exit fence fma fns getctarank
    griddepcontrol isspacep istypep ld ldmatrix ldu lg2 lop3 mad mad24 madc mapa match
    max mbarrier membar min mma mov movmatrix mul mul24 multimem nanosleep neg not or
    pmevent popc prefetch prefetchu prmt rcp red redux rem ret rsqrt sad selp set setmaxnreg
    setp shf shfl shl shr sin slct sqrt st stackrestore stacksave stmatrix sub subc suld
    suq sured sust szext tanh tcgen05 tensormap testp tex tld4 trap txq vabsdiff vadd
    vote vshl wgmma wmma xor""".split()  # noqa: SIM905 (a word list reads better so)
)


def ptx_hint(store: Store, topic: str, searched: list[str]) -> str:
    """Advice to index the ``ptx`` corpus, for a PTX name looked up where it is not indexed."""
    from .corpus import load_corpora

    t = topic.strip()
    looks_ptx = t.startswith(".") or ("." in t and t.split(".", 1)[0].lower() in PTX_OPCODES)
    if not looks_ptx or "ptx" in searched or "ptx" in store.corpora():
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
    ``explicit`` when the caller chose the corpora (then no advice about other ones)."""
    result = _lookup(store, topic, corpora, alternatives)
    if not explicit:
        result.hint = ptx_hint(store, topic, corpora or store.corpora())
    return result


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
