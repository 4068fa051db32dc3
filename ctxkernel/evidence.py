"""Evidence to context: what the compiled code showed (a dumps finding such as an MMA
without WGMMA on sm_90, no TMA on Hopper, narrow global loads, spills) turned into one or
two hit ids that explain the better instruction and show an example, found through the
concept links and the architecture filter.

The harness names the finding (``harness.perf.dumps`` codes in the verdict's
``performance.dump.codes``) and knows nothing of retrieval; this is the layer where the
two meet — ``ctxkernel check``, the agent's check tool and MCP call ``for_verdict`` when
an index is present, and nothing changes without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.perf import dumps

from .links import resolve

if TYPE_CHECKING:
    from .store import Store

MAX_FINDINGS = 2  # findings that get context, each with a section and an example


@dataclass(frozen=True)
class Want:
    """What explains a finding: a PTX concept, and words for a lexical example search
    (used when the concept is too common for its links to pick a good example)."""

    concept: str
    example_words: str = ""
    prefer: str = ""  # a word an example's path should hold (a GEMM for an MMA finding)


WANTS: dict[str, Want] = {
    dumps.MMA_WITHOUT_WGMMA: Want("wgmma.mma_async", prefer="gemm"),
    dumps.NO_TENSOR_CORES: Want("wgmma.mma_async", prefer="gemm"),
    dumps.NO_TMA: Want("cp.async.bulk.tensor"),
    dumps.NARROW_LOADS: Want("ld", "vectorized 128-bit global loads"),
    dumps.SPILLS: Want("setmaxnreg"),
    dumps.LOCAL_MEMORY: Want("ld", "register spills local memory"),
}
# Which corpus group holds examples in a backend's own language.
_BACKEND_GROUPS = {
    "triton": ("triton",),
    "triton_aot": ("triton",),
    "cutedsl": ("cutlass", "python"),
    "cuda_inline": ("cutlass", "cuda"),
}


@dataclass
class Evidence:
    code: str
    concept: str
    section: str  # the PTX section's hit id, or ""
    section_url: str
    example: str  # an example's hit id, or ""
    example_url: str
    arch: int | None = None

    @property
    def where(self) -> str:
        return f" on sm_{self.arch}" if self.arch else ""

    def to_json(self) -> dict[str, Any]:
        return {"type": "evidence", **self.__dict__}

    def line(self) -> str:
        """One line per id (an id is never cut): the finding, the section, the example."""
        out = [f"context for {self.code} ({self.concept}{self.where}): read these ids"]
        if self.section:
            out.append(f"  section {self.section}")
        if self.example:
            out.append(f"  example {self.example}")
        return "\n".join(out)


def codes_of(doc: Mapping[str, Any]) -> list[tuple[str, int | None]]:
    """(finding code, arch) pairs of a verdict's JSON, first occurrence of each code."""
    dump = (doc.get("performance") or {}).get("dump") or {}
    seen: dict[str, int | None] = {}
    for entry in dump.get("codes") or []:
        code = entry.get("code") if isinstance(entry, Mapping) else None
        if isinstance(code, str) and code not in seen:
            seen[code] = entry.get("arch")
    return list(seen.items())


def for_verdict(store: Store | None, doc: Mapping[str, Any]) -> list[Evidence]:
    """Evidence for a verdict's dumps findings, or [] (no index, no PTX, nothing found)."""
    if store is None or resolve.PTX_CORPUS not in store.corpora():
        return []
    backend = str(doc.get("backend") or "")
    out: list[Evidence] = []
    vocab = resolve.Vocabulary.of(store)
    for code, arch in codes_of(doc):
        want = WANTS.get(code)
        if want is None:
            continue
        found = _explain(store, vocab, code, want, arch, backend)
        if found is not None:
            out.append(found)
        if len(out) >= MAX_FINDINGS:
            break
    return out


def _explain(
    store: Store,
    vocab: resolve.Vocabulary,
    code: str,
    want: Want,
    arch: int | None,
    backend: str,
) -> Evidence | None:
    concept = vocab.concept_of(want.concept)
    if concept is None:
        return None
    sections = resolve.sections(store, [concept], vocab, arch)
    if not sections:
        return None
    section = sections[0].chunk
    if want.example_words:
        example = _searched_example(store, want.example_words, arch, backend)
    else:
        example = _example(store, vocab, concept, arch, backend, want.prefer)
    return Evidence(
        code,
        vocab.name(concept),
        section.id,
        section.url,
        example.id if example else "",
        example.url if example else "",
        arch,
    )


def _searched_example(store: Store, words: str, arch: int | None, backend: str) -> Any:
    """The best lexical match for ``words`` among the examples (no embedding model)."""
    from . import arch as archmod
    from .search import Filters, Searcher

    prefer = _BACKEND_GROUPS.get(backend, ())
    names = [c for c in store.corpora() if c != resolve.PTX_CORPUS]
    if prefer and prefer[0] in names:
        names = [prefer[0]]
    if not names:
        return None
    searcher = Searcher(store, None)  # type: ignore[arg-type]  # lexical: never embeds
    for kind in ("example", "tutorial"):
        hits = searcher.search(words, names, 10, "lexical", Filters(kind=kind)).hits
        for hit in hits:
            if archmod.accepts(hit.chunk, arch):
                return hit.chunk
    return None


def _example(
    store: Store,
    vocab: resolve.Vocabulary,
    concept: str,
    arch: int | None,
    backend: str,
    word: str = "",
) -> Any:
    found = resolve.for_concepts(store, [concept], None, arch, vocab)
    examples = [lk for lk in found if lk.group == "examples"]
    prefer = _BACKEND_GROUPS.get(backend, ())

    def fits(link: resolve.Link) -> bool:
        if not prefer:
            return True
        corpus_ok = link.chunk.corpus == prefer[0]
        return corpus_ok and (len(prefer) == 1 or link.chunk.language == prefer[1])

    for pool in ([lk for lk in examples if fits(lk)], examples, found):
        if pool:
            # an example made for this architecture before one that only runs on it
            target = f"sm{arch}" if arch else ""
            pool.sort(
                key=lambda lk: (
                    0 if word and word in lk.chunk.path.lower() else 1,
                    0 if target and target in lk.chunk.arch else 1,
                )
            )
            return pool[0].chunk
    return None


def lines(evidence: list[Evidence]) -> list[str]:
    return [e.line() for e in evidence]


def for_verdict_quietly(store_factory: Any, doc: Mapping[str, Any]) -> list[Evidence]:
    """``for_verdict`` that never takes a check down: a missing or damaged index, a
    missing optional dependency, anything, means no evidence."""
    if not codes_of(doc):
        return []  # nothing to explain: the index is not even opened
    try:
        store = store_factory()
        return for_verdict(store, doc)
    except Exception:  # evidence is a bonus: whatever breaks it must not fail the check
        return []
