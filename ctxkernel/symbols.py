"""Definitions by name: which chunks define or document a name such as ``tl.dot``,
``make_tiled_copy``, ``wgmma.mma_async`` or ``.reqntid``, best first.

Used by ``docs`` (the answer to a lookup) and by the searcher (a ranked list fused with
the others), so a query naming a symbol finds the place that defines it rather than the
many places that use it.
"""

from __future__ import annotations

import re
from typing import Any

from .corpus import Chunk
from .store import CorpusCache

# Module aliases people and agents write, and path fragments of the modules they name.
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
    "cute.arch": ("cute/arch",),
}

_KIND_RANK = {"doc": 0, "source": 0, "tutorial": 2, "example": 3, "test": 4}
_LAST = re.compile(r"(?:\.|::|\s>\s|:\s)")


def split_name(topic: str) -> tuple[str, str]:
    """(qualifier, name): ``tl.dot`` -> (``tl``, ``dot``); ``.reqntid`` and ``dot`` have no qualifier."""
    t = topic.strip().rstrip("()").replace("::", ".")
    if t.startswith(".") or "." not in t:
        return "", t
    qual, _, name = t.rpartition(".")
    return qual, name


def candidates(topic: str) -> list[tuple[str, str, int]]:
    """(name to look up, qualifier it should sit under, priority), best first."""
    t = topic.strip().rstrip("()").replace("::", ".")
    out = [(t, "", 0)]
    qual, name = split_name(t)
    if qual:
        out.append((name, qual, 1))
    if not t.startswith(".") and t.lower() != t:
        out.append((t.lower(), "", 2))
    return out


_CODE = frozenset({"python", "cpp", "cuda"})


def _defines_itself(chunk: Chunk, name: str) -> bool:
    """The chunk *is* the definition: code that defines the name (the lookup already
    found it among the chunk's defined names), or a section whose symbol or title ends
    with it — not an index page that lists it."""
    if chunk.language in _CODE:
        return True
    last = _LAST.split(chunk.symbol)[-1].strip() if chunk.symbol else ""
    lname = name.lower()
    if last.lower() in (lname, lname.rsplit(".", 1)[-1]) or chunk.symbol.lower().endswith(lname):
        return True
    return chunk.title.split(" (part")[0].rstrip("`: ").lower().endswith(lname)


def rank(
    cache: CorpusCache, topic: str, filters: Any = None
) -> list[tuple[tuple[Any, ...], Chunk]]:
    """Chunks of one corpus that define ``topic``, with their sort keys, best first."""
    # ``cute.size`` is the Python DSL's spelling, ``cute::size`` the C++ one
    dotted = "." in topic.strip().lstrip(".") and "::" not in topic
    found: dict[int, tuple[str, str, int, bool]] = {}
    for looked_up, qualifier, priority in candidates(topic):
        for row, defined in cache.defined(looked_up):
            found.setdefault(row, (looked_up, qualifier, priority, defined == looked_up))
    chunks = cache.chunks_by_rows(list(found))
    scored = []
    for row, (looked_up, qualifier, priority, exact) in found.items():
        chunk = chunks.get(row)
        if chunk is None or (filters is not None and not filters.accepts(chunk)):
            continue
        fragments = ALIASES.get(qualifier, (qualifier.replace(".", "/"),)) if qualifier else ()
        # the definition itself (a def, a section titled by the name) before a listing
        # that merely mentions the full name (an API index page)
        key = (
            0 if _defines_itself(chunk, looked_up) else 1,
            priority,
            0 if not fragments or any(f in chunk.path for f in fragments) else 1,
            1 if dotted and qualifier and chunk.language in ("cpp", "cuda") else 0,
            0 if chunk.language in _CODE else 1,  # the API's own definition before a guide about it
            0 if exact else 1,
            _KIND_RANK.get(chunk.kind, 5),
            0 if chunk.doc else 1,
            chunk.path.count("/"),
            chunk.path,
            chunk.start_line,
        )
        scored.append((key, chunk))
    scored.sort(key=lambda s: s[0])
    return scored
