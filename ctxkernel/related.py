"""Related: everything the concept links connect to one hit — its definition, the PTX
section it implements, the other wrappers of the same instruction, its callers and
sibling examples — and the "implemented by / used in" list ``docs`` shows after its best
section. Built on ``links`` (the artifacts) and ``arch`` (the target filter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import arch as archmod
from .corpus import Chunk, parse_chunk_id
from .errors import UserError
from .links.mentions import norm
from .links.render import pick
from .links.resolve import (
    PTX_CORPUS,
    Link,
    Vocabulary,
    concepts_of_chunk,
    for_concepts,
    sections,
)

if TYPE_CHECKING:
    from .docs import DocsResult
    from .store import Store


@dataclass
class Related:
    chunk: Chunk
    concepts: list[str]
    sections: list[Link] = field(default_factory=list)
    implementers: list[Link] = field(default_factory=list)
    users: list[Link] = field(default_factory=list)
    siblings: list[Link] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        c = self.chunk
        return {
            "type": "related",
            "id": c.id,
            "symbol": c.symbol,
            "title": c.title,
            "url": c.url,
            "arch": archmod.label(c),
            "concepts": self.concepts,
            "links": [
                {**link.to_json(), "relation": relation}
                for relation, group in (
                    ("section", self.sections),
                    ("implementer", self.implementers),
                    ("user", self.users),
                    ("sibling", self.siblings),
                )
                for link in group
            ],
            "totals": self.totals,
        }


def find_chunk(store: Store, ref: str) -> Chunk:
    """The indexed chunk a hit id names (or the first chunk at its start line)."""
    corpus, path, start, _ = parse_chunk_id(ref)
    if corpus not in store.corpora():
        have = ", ".join(store.corpora()) or "none"
        raise UserError(f"corpus {corpus!r} is not indexed (indexed: {have})")
    cache = store.synced_cache(corpus)
    exact = cache.chunks_by_ids([ref.strip()])
    if exact:
        return next(iter(exact.values()))
    chunks = cache.chunks_of_file(path)
    if not chunks:
        raise UserError(f"{corpus}:{path} is not an indexed file")
    line = start or 1
    for c in chunks:
        if c.start_line <= line <= c.end_line:
            return c
    raise UserError(f"no chunk of {corpus}:{path} holds line {line}")


def related(store: Store, ref: str, target: int | None = None, per_group: int = 3) -> Related:
    chunk = find_chunk(store, ref)
    vocab = Vocabulary.of(store)
    concepts = concepts_of_chunk(store, chunk, vocab)
    out = Related(chunk, [vocab.name(c) for c in concepts])
    if not concepts:
        return out
    found = [
        link
        for link in for_concepts(store, concepts, None, target, vocab)
        if link.chunk.id != chunk.id
    ]
    names = set(chunk.defines)
    callers = [lk for lk in found if lk.role == "uses" and (lk.via in names or names & lk.vias)]
    implementers = [lk for lk in found if lk.role == "implements"]
    caller_ids = {lk.chunk.id for lk in callers}
    siblings = [
        lk
        for lk in found
        if lk.group == "examples" and lk.chunk.path != chunk.path and lk.chunk.id not in caller_ids
    ]
    if chunk.corpus != PTX_CORPUS:
        out.sections = sections(store, concepts, vocab, target)
    out.implementers = pick(implementers, per_group)
    out.users = pick(callers, per_group * 2, per_file=1)
    out.siblings = pick(siblings, per_group)
    out.totals = {
        "implementers": len(implementers),
        "users": len(callers),
        "siblings": len(siblings),
    }
    return out


def render_related(rel: Related) -> list[str]:
    c = rel.chunk
    lines = [f"{c.id}  {c.symbol or c.title}".rstrip()]
    need = archmod.label(c)
    if c.url:
        lines.append(f"url: {c.url}")
    if need:
        lines.append(f"arch: {need}")
    if not rel.concepts:
        lines.append("no PTX instruction is linked to this hit")
        return lines
    lines.append("concepts: " + ", ".join(rel.concepts))
    for title, group, total in (
        ("documented in (PTX)", rel.sections, None),
        ("implemented by", rel.implementers, rel.totals.get("implementers")),
        ("called from", rel.users, rel.totals.get("users")),
        ("sibling examples", rel.siblings, rel.totals.get("siblings")),
    ):
        if not group:
            continue
        more = f" ({total} in all)" if total and total > len(group) else ""
        lines.append(f"{title}{more}:")
        for link in group:
            label = link.chunk.symbol or link.chunk.title or link.via
            arch = archmod.label(link.chunk)
            tags = ", ".join(x for x in (link.group, link.concept, arch) if x)
            lines.append(f"  {link.chunk.id}  {label[:60]}  [{tags}]")
            if link.chunk.url:
                lines.append(f"    {link.chunk.url}")
    return lines


def docs_links(
    store: Store, result: DocsResult, target: int | None = None, per_group: int = 3
) -> tuple[list[Link], int]:
    """The "implemented by / used in" links of a docs answer (shown, total)."""
    if result.best is None:
        return [], 0
    vocab = Vocabulary.of(store)
    concept = vocab.concept_of(result.topic) if result.topic.strip() else None
    best = result.best.chunk
    if (
        concept
        and concept in vocab.names
        and (best.corpus == PTX_CORPUS or norm(result.topic) == concept)
    ):
        concepts = [concept]
    else:
        concepts = concepts_of_chunk(store, best, vocab)
    if not concepts:
        return [], 0
    found = [
        link
        for link in for_concepts(store, concepts, None, target, vocab)
        if link.chunk.id != best.id
    ]
    asked = norm(result.topic)
    if len(concepts) == 1 and asked.startswith(concepts[0] + "_"):
        # a name more precise than any section (fence.proxy.async is in "fence"): the
        # links that spell it, or a shorter form of it, not the section's other forms
        found = [lk for lk in found if asked.startswith(lk.key) or lk.key.startswith(asked)]
    shown = pick(found, per_group)
    if best.corpus != PTX_CORPUS:
        shown = sections(store, concepts, vocab, target)[:1] + shown
    return shown, len(found)
