"""Target architectures: what a chunk or a PTX instruction needs to run, and the filter
that drops what a target (``sm_80``, ``sm_90``, ``sm_100``, ...) cannot run.

A chunk's requirement is read at query time from what the index already holds: its
path (``sm90``, ``hopper/``, ``blackwell/``, ``mma_sm100_umma.hpp``), its guards
(``#if __CUDA_ARCH__ >= 900``, ``CUTE_ARCH_TMA_SM90_ENABLED``) and its architecture tags;
a PTX section's from its "Target ISA Notes" (``Requires sm_90a``). Hopper's
``wgmma``/``gmma`` and Blackwell's ``tcgen05``/``umma`` are arch-specific (``sm_90a``,
``sm_100a``) features: code built on them runs on that family only, so ``sm_100`` drops
an sm_90a-only WGMMA atom and ``sm_90`` drops a tcgen05 one.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .corpus import Chunk, arch_tags
from .errors import UserError

if TYPE_CHECKING:
    from .store import Store

_TARGET_RE = re.compile(r"^(?:sm_?|compute_)?(\d{2,3})[af]?$", re.I)
_CUDA_ARCH_RE = re.compile(r"__CUDA_ARCH__\s*>=?\s*(\d{3,4})")
_ISA_NOTES_RE = re.compile(
    r"Target ISA Notes?(?P<body>.*?)(?:\n\s*(?:#|Examples?\b)|\Z)", re.S | re.I
)
_SM_RE = re.compile(r"(?<![A-Za-z0-9])sm_(\d{2,3})([af]?)")
# features that exist on one family only (the "a" targets): which family
_FAMILY_ONLY = (
    (re.compile(r"\b(?:wgmma|gmma|warpgroup_mma|warpgroup\.mma)", re.I), 90),
    (re.compile(r"\b(?:tcgen05|umma)", re.I), 100),
)


@dataclass(frozen=True)
class Requirement:
    """The least architecture a piece of code or documentation needs (``sm`` as 90, 100),
    and ``family`` when it only runs on that family (sm_90a features fail on sm_100)."""

    sm: int
    family: int | None = None

    def runs_on(self, target: int) -> bool:
        if target < self.sm:
            return False
        return self.family is None or target // 10 == self.family // 10

    def label(self) -> str:
        return f"sm_{self.sm}{'a' if self.family else ''}"


def parse_target(text: str) -> int:
    """``sm_90``, ``sm90``, ``sm_90a``, ``90`` -> 90; UserError for anything else."""
    match = _TARGET_RE.match(text.strip())
    if not match:
        raise UserError(f"bad arch {text!r}: expected sm_80, sm_90, sm_100, ...")
    return int(match.group(1))


def of_name(name: str) -> Requirement | None:
    """What an instruction or API needs when its name alone says so (``tcgen05.mma``:
    sm_100a, ``wgmma.mma_async``: sm_90a), whatever the index holds of it; else None."""
    for pattern, family in _FAMILY_ONLY:
        if pattern.search(name):
            return Requirement(family, family)
    return None


def _family(text: str, sm: int) -> int | None:
    for pattern, family in _FAMILY_ONLY:
        if family == sm and pattern.search(text):
            return family
    return None


# Both below are pure functions of a chunk's path, tags and text, asked for every hit of
# every search (the regexes cost ~0.2 ms a chunk): a warm server meets the same chunks.
KNOWN_MAX = 50_000


def of_chunk(chunk: Chunk) -> Requirement | None:
    """What ``chunk`` needs, or None when nothing says (then every target keeps it)."""
    return _requirement(chunk.path, tuple(chunk.arch or ()), chunk.text)


@functools.lru_cache(maxsize=KNOWN_MAX)
def _requirement(path: str, arch: tuple[str, ...], text: str) -> Requirement | None:
    notes = isa_notes(text)
    if notes is not None:
        return notes
    # the path speaks first: an sm_100 example that mentions sm_90 in passing is sm_100
    from_path = arch_tags(path)
    guard = [int(m.group(1)) // 10 for m in _CUDA_ARCH_RE.finditer(text)]
    if from_path:
        sm = int(from_path[0][2:])
    elif guard:
        sm = min(guard)
    elif arch:
        sm = min(int(t[2:]) for t in arch)
    else:
        return None
    if sm < 20:
        return None
    return Requirement(sm, _family(path + "\n" + text[:4000], sm))


@functools.lru_cache(maxsize=KNOWN_MAX)
def isa_notes(text: str) -> Requirement | None:
    """The requirement a PTX section's "Target ISA Notes" paragraph states, if it has one."""
    match = _ISA_NOTES_RE.search(text)
    if match is None:
        return None
    found = [(int(n), suffix) for n, suffix in _SM_RE.findall(match.group("body"))]
    if not found:
        return None
    sm, suffix = min(found)
    family = sm if suffix and all(s for _, s in found) else None
    return Requirement(sm, family)


class Resolver:
    """Requirements with the index at hand: a documentation section cut into parts states
    its Target ISA Notes once, in one part; the other parts need the same. One resolver
    may serve many searches: what it read of a section holds until that corpus is
    indexed again (its generation changes)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._sections: dict[tuple[str, str, str, str], Requirement | None] = {}

    def of(self, chunk: Chunk) -> Requirement | None:
        if chunk.language in _DOC_LANGUAGES and isa_notes(chunk.text) is None:
            notes = self._section_notes(chunk)
            if notes is not None:
                return notes
        return of_chunk(chunk)

    def _section_notes(self, chunk: Chunk) -> Requirement | None:
        title = _section_title(chunk.title)
        if chunk.corpus not in self.store.corpora():
            return None
        cache = self.store.synced_cache(chunk.corpus)
        key = (chunk.corpus, cache.get_info("generation") or "", chunk.path, title)
        if key not in self._sections:
            found = None
            for part in cache.chunks_of_file(chunk.path):
                if _section_title(part.title) == title:
                    found = isa_notes(part.text)
                    if found is not None:
                        break
            self._sections[key] = found
        return self._sections[key]


_DOC_LANGUAGES = frozenset({"markdown", "html", "rst"})


def _section_title(title: str) -> str:
    return title.split(" (part", 1)[0].strip()


def accepts(chunk: Chunk, target: int | None, resolver: Resolver | None = None) -> bool:
    if target is None:
        return True
    need = resolver.of(chunk) if resolver else of_chunk(chunk)
    return need is None or need.runs_on(target)


def label(chunk: Chunk, resolver: Resolver | None = None) -> str:
    """``sm_90a``, ``sm_100``, or "" when the chunk says nothing of its target."""
    need = resolver.of(chunk) if resolver else of_chunk(chunk)
    return need.label() if need else ""
