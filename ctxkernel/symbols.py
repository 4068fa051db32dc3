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
from .corpuscache import CorpusCache

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

# First parts of PTX instruction names (``wgmma.mma_async`` -> ``wgmma``); with directives
# (``.reqntid``) they say a topic names a PTX instruction, documented by the PTX ISA.
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


def looks_ptx(topic: str) -> bool:
    """``mma.sync``, ``tcgen05.mma``, ``.reqntid``: a PTX instruction or directive."""
    t = topic.strip()
    return t.startswith(".") or ("." in t and t.split(".", 1)[0].lower() in PTX_OPCODES)


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


def is_exact(key: tuple[Any, ...]) -> bool:
    """A ``rank`` key of the definition of the name asked for itself: the whole name, or
    its last part under the module its qualifier points at (``tl.dot`` -> ``dot`` in
    ``triton/language``) — not a same-named thing elsewhere (``mma`` of ``tcgen05.mma``
    in a profiler module)."""
    return key[0] == 0 and (key[1] != 1 or key[2] == 0)


def rank(
    cache: CorpusCache, topic: str, filters: Any = None
) -> list[tuple[tuple[Any, ...], Chunk]]:
    """Chunks of one corpus that define ``topic``, with their sort keys, best first."""
    # ``cute.size`` is the Python DSL's spelling, ``cute::size`` the C++ one
    dotted = "." in topic.strip().lstrip(".") and "::" not in topic
    # a PTX name's last part is a modifier (``sync`` of ``mma.sync``, ``tensor`` of
    # ``cp.async.bulk.tensor``), not a name of its own: a ``def sync`` is no answer
    # unless it sits under a module named for the instruction (``nvgpu/tcgen05/``)
    ptx = looks_ptx(topic)
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
        in_module = not fragments or any(f in chunk.path for f in fragments)
        if ptx and priority == 1 and not in_module:
            continue
        # the definition itself (a def, a section titled by the name) before a listing
        # that merely mentions the full name (an API index page)
        key = (
            0 if _defines_itself(chunk, looked_up) else 1,
            priority,
            0 if in_module else 1,
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
