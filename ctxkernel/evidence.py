"""Evidence to context: what the compiled code showed (a dumps finding such as an MMA
without WGMMA on sm_90, no TMA on Hopper, narrow global loads, spills) turned into one or
two hit ids that explain the better instruction and show an example, found through the
concept links and the architecture filter.

The harness names the finding (``harness.dumps`` codes in the verdict's
``performance.dump.codes``) and knows nothing of retrieval; this is the layer where the
two meet — ``ctxkernel check``, the agent's check tool and MCP call ``for_verdict`` when
an index is present, and nothing changes without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness import dumps

from . import links

if TYPE_CHECKING:
    from .store import Store

MAX_FINDINGS = 2  # findings that get context, each with a section and an example
MAX_LINE = 260  # characters of one evidence line (the feedback has a size limit)


@dataclass(frozen=True)
class Want:
    """What explains a finding: a PTX concept, and words for a lexical example search
    when no linked example fits."""

    concept: str
    example_words: str


WANTS: dict[str, Want] = {
    dumps.MMA_WITHOUT_WGMMA: Want("wgmma.mma_async", "warpgroup mma hopper gemm"),
    dumps.NO_TENSOR_CORES: Want("wgmma.mma_async", "warpgroup mma hopper gemm"),
    dumps.NO_TMA: Want("cp.async.bulk.tensor", "tma load hopper mbarrier"),
    dumps.NARROW_LOADS: Want("ld", "vectorized 128-bit global load"),
    dumps.SPILLS: Want("setmaxnreg", "register pressure spills"),
    dumps.LOCAL_MEMORY: Want("ld", "local memory spills registers"),
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

    def to_json(self) -> dict[str, Any]:
        return {"type": "evidence", **self.__dict__}

    def line(self) -> str:
        parts = [f"context for {self.code}: {self.concept}"]
        if self.section:
            parts.append(f"section {self.section}")
        if self.example:
            parts.append(f"example {self.example}")
        text = "; ".join(parts) + " (docs/read these ids)"
        return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


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
    if store is None or links.PTX_CORPUS not in store.corpora():
        return []
    backend = str(doc.get("backend") or "")
    out: list[Evidence] = []
    vocab = links.Vocabulary.of(store)
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
    vocab: links.Vocabulary,
    code: str,
    want: Want,
    arch: int | None,
    backend: str,
) -> Evidence | None:
    concept = vocab.concept_of(want.concept)
    if concept is None:
        return None
    sections = links.sections(store, [concept], vocab, arch)
    if not sections:
        return None
    section = sections[0].chunk
    example = _example(store, vocab, concept, arch, backend)
    return Evidence(
        code,
        vocab.name(concept),
        section.id,
        section.url,
        example.id if example else "",
        example.url if example else "",
    )


def _example(
    store: Store, vocab: links.Vocabulary, concept: str, arch: int | None, backend: str
) -> Any:
    found = links.for_concepts(store, [concept], None, arch, vocab)
    examples = [lk for lk in found if lk.group == "examples"]
    prefer = _BACKEND_GROUPS.get(backend, ())

    def fits(link: links.Link) -> bool:
        if not prefer:
            return True
        corpus_ok = link.chunk.corpus == prefer[0]
        return corpus_ok and (len(prefer) == 1 or link.chunk.language == prefer[1])

    for pool in ([lk for lk in examples if fits(lk)], examples, found):
        if pool:
            # an example made for this architecture before one that only runs on it
            target = f"sm{arch}" if arch else ""
            pool.sort(key=lambda lk: 0 if target and target in lk.chunk.arch else 1)
            return pool[0].chunk
    return None


def lines(evidence: list[Evidence]) -> list[str]:
    return [e.line() for e in evidence]


def for_verdict_quietly(store_factory: Any, doc: Mapping[str, Any]) -> list[Evidence]:
    """``for_verdict`` that never takes a check down: a missing or damaged index, a
    missing optional dependency, anything, means no evidence."""
    try:
        store = store_factory()
        return for_verdict(store, doc)
    except Exception:
        return []
