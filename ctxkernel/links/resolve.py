"""Resolving links: which PTX concept a stored key belongs to (``Vocabulary``: the names
the ``ptx`` corpus defines now, or the wrappers' own spelling without it), every link to a
concept across the corpora best first (``for_concepts``), the concepts a chunk documents,
emits or calls (``concepts_of_chunk``), and the PTX sections documenting them.
"""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import arch as archmod
from ..corpus import Chunk
from ..symbols import PTX_OPCODES
from .mentions import _EXAMPLE_KINDS, norm
from .table import table

if TYPE_CHECKING:
    from ..store import Store

PTX_CORPUS = "ptx"


@dataclass
class Link:
    """A resolved link, for display: a chunk that implements or uses a PTX concept."""

    concept: str  # the PTX name, e.g. wgmma.mma_async
    role: str
    group: str  # "ptx", "cutlass C++", "CuTeDSL", "triton/gluon", "examples", or a corpus
    chunk: Chunk
    how: str
    via: str = ""
    raw: str = ""
    key: str = ""  # the instruction as the link stored it, normalised
    # every wrapper the chunk calls for this concept (``via`` is the best-ranked one): a
    # kernel calling both warpgroup_reg_alloc and _dealloc is a caller of each
    vias: frozenset[str] = frozenset()

    def to_json(self) -> dict[str, Any]:
        c = self.chunk
        return {
            "type": "link",
            "concept": self.concept,
            "role": self.role,
            "group": self.group,
            "id": c.id,
            "corpus": c.corpus,
            "path": c.path,
            "symbol": c.symbol,
            "title": c.title,
            "kind": c.kind,
            "url": c.url,
            "how": self.how,
            "via": self.via,
            "instruction": self.raw,
            "arch": archmod.label(c),
        }


@dataclass
class Vocabulary:
    """The PTX names the ``ptx`` corpus defines, by key (``wgmma_mma_async`` ->
    ``wgmma.mma_async``). Without the PTX manual (``spelled``), the names the wrappers
    themselves are built on stand in for them (``spelled_in``): a wrapper still leads to
    the others of its instruction and to their callers in every corpus, and only the
    section is missing."""

    names: dict[str, str] = field(default_factory=dict)
    # names only sections about an instruction define, not its own section ("Block
    # Scaling for mma.sync", "Matrix Fragments for mma.m16n8k16"): a link resolves past
    # them to the instruction (``mma.sync.aligned.m16n8k8`` is the ``mma`` instruction)
    aside: frozenset[str] = frozenset()
    spelled: bool = False  # names from the code's own spelling: a key no name begins is its own
    _resolved: dict[str, str | None] = field(default_factory=dict, repr=False, compare=False)
    _order: list[tuple[str, int]] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, store: Store) -> Vocabulary:
        if PTX_CORPUS not in store.corpora():
            return cls.spelled_in(store)
        cache = store.synced_cache(PTX_CORPUS)
        names: dict[str, str] = {}
        instruction: set[str] = set()
        for name, title in cache.defined_with_titles():
            first = name.split(".", 1)[0].lower()
            if ("." in name and first in PTX_OPCODES) or name.lower() in PTX_OPCODES:
                key = norm(name)
                names.setdefault(key, name)
                if "instruction" in (title or "").lower():
                    instruction.add(key)
        return cls(names, frozenset(set(names) - instruction))

    @classmethod
    def spelled_in(cls, store: Store) -> Vocabulary:
        """Without the PTX manual (``make demo``): the instruction names of the links
        that name one whole — ``nvvm`` ops, Gluon intrinsics, the manual anchors CuTeDSL
        cites — so an ``asm`` string (``wgmma.mma_async.sync.aligned.m64n8k16...``)
        resolves to the longest of them it begins with, as it would to a section."""
        names: dict[str, str] = {}
        for corpus in store.corpora():
            db = table(store.synced_cache(corpus))
            try:
                found = db.execute(
                    "SELECT DISTINCT key FROM links WHERE how IN ('nvvm', 'intrinsic', 'anchor')"
                ).fetchall()
            finally:
                db.close()
            for (key,) in found:
                names.setdefault(key, key.replace("_", "."))
        return cls(names, spelled=True)

    def resolve(self, key: str, how: str = "") -> str | None:
        """The concept (key of the most specific PTX name) a link's key belongs to."""
        if not self.names:
            return key if self.spelled else None
        if key not in self._resolved:  # a docs call asks for thousands of keys, many alike
            self._resolved[key] = self._resolve(key)
        return self._resolved[key]

    def _resolve(self, key: str) -> str | None:
        if key not in self.names:
            # a name cut short (an anchor ``...-wgmma-mma``, a bare ``elect``): the
            # shortest PTX name it begins
            if self._order is None:  # names in sorted order, with their place in ``names``
                self._order = sorted((k, i) for i, k in enumerate(self.names))
            prefix = key + "_"
            at = bisect.bisect_left(self._order, (prefix, -1))
            best: tuple[int, int, str] | None = None  # (length, place): sorted()'s choice
            while at < len(self._order) and self._order[at][0].startswith(prefix):
                k, place = self._order[at]
                if k not in self.aside and (best is None or (len(k), place) < best[:2]):
                    best = (len(k), place, k)
                at += 1
            if best is not None:
                return best[2]
        parts = key.split("_")
        for n in range(len(parts), 0, -1):
            candidate = "_".join(parts[:n])
            if candidate in self.names and candidate not in self.aside:
                return candidate
        return key if self.spelled else None

    def name(self, key: str) -> str:
        return self.names.get(key, key.replace("_", "."))

    def concept_of(self, topic: str) -> str | None:
        key = norm(topic)
        return key if key in self.names and key not in self.aside else self.resolve(key)


def group_of(chunk: Chunk) -> str:
    if chunk.corpus == PTX_CORPUS:
        return "ptx"
    if chunk.kind in _EXAMPLE_KINDS:
        return "examples"
    if chunk.corpus == "cutlass":
        return "CuTeDSL" if chunk.language == "python" else "cutlass C++"
    if chunk.corpus == "triton":
        return "triton/gluon"
    return chunk.corpus


GROUP_ORDER = ("ptx", "cutlass C++", "CuTeDSL", "triton/gluon", "examples")
_HOW_RANK = {"asm": 0, "intrinsic": 0, "nvvm": 1, "anchor": 2, "call": 3, "call2": 4, "string": 5}


def _rows_for(db: sqlite3.Connection, key: str) -> Iterable[tuple[str, str, str, str, str, str]]:
    """Rows whose key is ``key``, extends it, or (an anchor cut short) is a prefix of it."""
    parts = key.split("_")
    prefixes = ["_".join(parts[:n]) for n in range(1, len(parts) + 1)]
    marks = ",".join("?" * len(prefixes))
    return db.execute(
        "SELECT key, raw, chunk_id, role, how, via FROM links WHERE key IN "
        f"({marks}) OR (key >= ? AND key < ?)",
        (*prefixes, key + "_", key + "`"),
    )


def for_concepts(
    store: Store,
    concepts: Iterable[str],
    corpora: Iterable[str] | None = None,
    target: int | None = None,
    vocab: Vocabulary | None = None,
) -> list[Link]:
    """Every link to these concepts (PTX keys) in the indexed non-PTX corpora, best first."""
    vocab = vocab or Vocabulary.of(store)
    needs = archmod.Resolver(store)
    wanted = [c for c in dict.fromkeys(concepts) if c]
    out: list[Link] = []
    for corpus in corpora or store.corpora():
        if corpus == PTX_CORPUS:
            continue
        cache = store.synced_cache(corpus)
        db = table(cache)
        try:
            hits: dict[tuple[str, str], tuple[str, str, str, str, str]] = {}
            vias: dict[tuple[str, str], set[str]] = {}
            for concept in wanted:
                for key, raw, chunk_id, role, how, via in _rows_for(db, concept):
                    if vocab.resolve(key, how) != concept:
                        continue
                    if via:
                        vias.setdefault((concept, chunk_id), set()).add(via)
                    previous = hits.get((concept, chunk_id))
                    if previous is None or _HOW_RANK[how] < _HOW_RANK[previous[1]]:
                        hits[(concept, chunk_id)] = (role, how, via, raw, key)
        finally:
            db.close()
        chunks = cache.chunks_by_ids(sorted({cid for _, cid in hits}))
        for (concept, chunk_id), (role, how, via, raw, key) in hits.items():
            chunk = chunks.get(chunk_id)
            if chunk is None or not archmod.accepts(chunk, target, needs):
                continue
            out.append(
                Link(
                    vocab.name(concept), role, group_of(chunk), chunk, how, via, raw, key,
                    frozenset(vias.get((concept, chunk_id), ())),
                )
            )  # fmt: skip
    out.sort(key=_link_order)
    return out


def _link_order(link: Link) -> tuple[Any, ...]:
    group = GROUP_ORDER.index(link.group) if link.group in GROUP_ORDER else len(GROUP_ORDER)
    return (
        group,
        0 if link.role == "implements" else 1,
        _HOW_RANK.get(link.how, 5),
        link.chunk.path.count("/"),
        link.chunk.path,
        link.chunk.start_line,
    )


def concepts_of_chunk(store: Store, chunk: Chunk, vocab: Vocabulary | None = None) -> list[str]:
    """The PTX concepts a chunk documents (a PTX section), emits, wraps or calls a wrapper of."""
    vocab = vocab or Vocabulary.of(store)
    if chunk.corpus == PTX_CORPUS:
        # a section about an instruction (its fragments, its block scaling) stands for it
        keys = [vocab.concept_of(d) if norm(d) in vocab.names else None for d in chunk.defines]
        return [k for k in dict.fromkeys(keys) if k]
    cache = store.synced_cache(chunk.corpus)
    db = table(cache)
    try:
        rows = db.execute(
            "SELECT key, how, role FROM links WHERE chunk_id=? ORDER BY role", (chunk.id,)
        ).fetchall()
    finally:
        db.close()
    # what the chunk itself emits or wraps says what it is; its calls only when it has none
    own = [(key, how) for key, how, role in rows if role == "implements"]
    rows = own or [(key, how) for key, how, _ in rows]
    out: list[str] = []
    for key, how in rows:
        concept = vocab.resolve(key, how)
        if concept and concept not in out:
            out.append(concept)
    return out


def sections(
    store: Store, concepts: Iterable[str], vocab: Vocabulary, target: int | None = None
) -> list[Link]:
    """The PTX sections documenting these concepts (the first definition of each)."""
    from .. import symbols

    if PTX_CORPUS not in store.corpora():
        return []
    cache = store.synced_cache(PTX_CORPUS)
    out: list[Link] = []
    for concept in concepts:
        name = vocab.name(concept)
        for _, chunk in symbols.rank(cache, name)[:1]:
            if archmod.accepts(chunk, target, archmod.Resolver(store)):
                out.append(Link(name, "documents", "ptx", chunk, "section", "", name))
    return out
