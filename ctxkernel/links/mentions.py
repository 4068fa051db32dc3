"""Mentions: the PTX instructions one chunk emits or wraps -- PTX in string literals
(inline ``asm``), ``nvvm`` ops, PTX manual anchors, Gluon intrinsics -- each under one
normalised key (``norm``), with the role the chunk plays for it and the definition that
holds it. The tables these are found with (PTX opcodes, nvvm aliases, the intrinsics) live
here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..corpus import Chunk
from ..symbols import PTX_OPCODES

_CODE = frozenset({"python", "cpp", "cuda"})
_EXAMPLE_KINDS = frozenset({"example", "tutorial"})

# Opcodes whose name alone says PTX; the others (add, ld, min, ...) count in a string
# only when the string also looks like PTX (operands, a terminating ';').
_DISTINCT = frozenset(
    """wgmma tcgen05 mbarrier cp ldmatrix stmatrix movmatrix elect setmaxnreg fence membar
    griddepcontrol clusterlaunchcontrol tensormap multimem redux barrier bar mma wmma cvta
    mapa getctarank prefetch prefetchu shfl vote match activemask red atom cvt ldu
    createpolicy discard applypriority""".split()  # noqa: SIM905
)
_OPS = "|".join(sorted(PTX_OPCODES, key=len, reverse=True))
_INSTR_RE = re.compile(
    rf"(?<![\w.%$])(?P<op>{_OPS})(?P<mods>\.[a-z0-9_]\w*(?:::\w+)*(?:\.\w+(?:::\w+)*)*)"
    r"(?=[\s;,{}\"'\\)]|$)"
)
_BARE_RE = re.compile(r"(?<![\w.%$])(?P<op>ldmatrix|stmatrix|setmaxnreg|elect)(?![\w])")
_STRING_RE = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'")
# a string that names a file (``#include "cutlass/arch/mma.h"``) writes no instruction
_FILE_NAME_RE = re.compile(r"[\w./+-]*\.(?:h|hh|hpp|cuh|cu|cpp|cc|inl|inc|py|md|txt|json)")
_NVVM_RE = re.compile(r"(?:\b|_)nvvm\.(?P<name>[a-z][a-z0-9_]*)\s*\(")
_ANCHOR_RE = re.compile(r"parallel-thread-execution/(?:index\.html)?#(?P<anchor>[a-z0-9-]+)")
_NVVM_SKIP = ("read_ptx_sreg", "inline_ptx", "load", "store", "fmin", "fmax", "fabs")
# nvvm op names that do not spell their PTX instruction
_NVVM_ALIASES = {
    "setmaxregister": "setmaxnreg",
    "mbarrier_wait_parity": "mbarrier_try_wait_parity",
    "fence_proxy_async": "fence_proxy_async",
}

# Wrappers whose PTX is emitted by a compiler's lowering rather than written in the
# wrapper (Triton's Gluon intrinsics): path fragment, defined name, PTX instruction,
# and how a caller spells the call.
INTRINSICS: tuple[tuple[str, str, str, str], ...] = (
    ("gluon/language/nvidia/hopper/__init__", "warpgroup_mma", "wgmma.mma_async", r"\bwarpgroup_mma\s*\("),
    ("gluon/language/nvidia/hopper/__init__", "warpgroup_mma_wait", "wgmma.wait_group", r"\bwarpgroup_mma_wait\s*\("),
    ("gluon/language/nvidia/hopper/__init__", "fence_async_shared", "fence.proxy.async", r"\bfence_async_shared\s*\("),
    ("gluon/language/nvidia/hopper/tma", "async_copy_global_to_shared", "cp.async.bulk.tensor", r"\btma\.async_copy_global_to_shared\s*\("),
    ("gluon/language/nvidia/hopper/tma", "async_copy_shared_to_global", "cp.async.bulk.tensor", r"\btma\.async_copy_shared_to_global\s*\("),
    ("gluon/language/nvidia/hopper/tma", "store_wait", "cp.async.bulk.wait_group", r"\btma\.store_wait\s*\("),
    ("gluon/language/nvidia/hopper/tma", "async_atomic_add", "cp.reduce.async.bulk.tensor", r"\btma\.async_atomic_add\s*\("),
    ("gluon/language/nvidia/ampere/mbarrier", "init", "mbarrier.init", r"\bmbarrier\.init\s*\("),
    ("gluon/language/nvidia/ampere/mbarrier", "invalidate", "mbarrier.inval", r"\bmbarrier\.invalidate\s*\("),
    ("gluon/language/nvidia/ampere/mbarrier", "wait", "mbarrier.try_wait", r"\bmbarrier\.wait\s*\("),
    ("gluon/language/nvidia/ampere/mbarrier", "arrive", "mbarrier.arrive", r"\bmbarrier\.arrive\s*\("),
    ("gluon/language/nvidia/hopper/mbarrier", "expect", "mbarrier.expect_tx", r"\bmbarrier\.expect\s*\("),
    ("gluon/language/nvidia/hopper/mbarrier", "arrive", "mbarrier.arrive", r"\bmbarrier\.arrive\s*\("),
    ("gluon/language/nvidia/ampere/async_copy", "async_copy_global_to_shared", "cp.async", r"\basync_copy\.async_copy_global_to_shared\s*\("),
    ("gluon/language/nvidia/ampere/async_copy", "commit_group", "cp.async.commit_group", r"\basync_copy\.commit_group\s*\("),
    ("gluon/language/nvidia/ampere/async_copy", "wait_group", "cp.async.wait_group", r"\basync_copy\.wait_group\s*\("),
    ("gluon/language/nvidia/ampere/async_copy", "mbarrier_arrive", "cp.async.mbarrier.arrive", r"\basync_copy\.mbarrier_arrive\s*\("),
    ("gluon/language/nvidia/ampere/__init__", "mma_v2", "mma", r"\bmma_v2\s*\("),
    ("gluon/language/nvidia/blackwell/__init__", "tcgen05_mma", "tcgen05.mma", r"\btcgen05_mma\s*\("),
    ("gluon/language/nvidia/blackwell/__init__", "tcgen05_mma_scaled", "tcgen05.mma", r"\btcgen05_mma_scaled\s*\("),
    ("gluon/language/nvidia/blackwell/__init__", "tcgen05_commit", "tcgen05.commit", r"\btcgen05_commit\s*\("),
    ("gluon/language/nvidia/blackwell/__init__", "tcgen05_copy", "tcgen05.cp", r"\btcgen05_copy\s*\("),
    ("gluon/language/nvidia/blackwell/__init__", "allocate_tensor_memory", "tcgen05.alloc", r"\ballocate_tensor_memory\s*\("),
    ("gluon/language/nvidia/blackwell/tma", "async_gather", "cp.async.bulk.tensor", r"\btma\.async_gather\s*\("),
    ("gluon/language/nvidia/blackwell/tma", "async_scatter", "cp.async.bulk.tensor", r"\btma\.async_scatter\s*\("),
    ("gluon/language/nvidia/blackwell/clc", "try_cancel", "clusterlaunchcontrol.try_cancel", r"\bclc\.try_cancel\s*\("),
    ("gluon/language/nvidia/hopper/cluster", "barrier", "barrier.cluster", r"\bcluster\.barrier\s*\("),
)  # fmt: skip
_STOP_NAMES = frozenset(
    """__init__ __call__ __new__ forward make make_fragment call apply load store copy
    init wait arrive commit fence sync value values shape layout get set size type
    run main kernel operator""".split()  # noqa: SIM905
)


def norm(name: str) -> str:
    """A PTX instruction, an nvvm op or an anchor as one key: ``cp.async.bulk.tensor`` and
    ``cp_async_bulk_tensor`` and ``cp-async-bulk-tensor`` -> ``cp_async_bulk_tensor``."""
    key = re.sub(r"[.\-:]+", "_", name.strip().lower())
    return re.sub(r"_+", "_", key).strip("_")


@dataclass(frozen=True)
class Mention:
    """One row of a corpus's link artifact."""

    key: str  # normalised instruction as written
    raw: str
    chunk_id: str
    role: str  # "implements" (emits or wraps it) or "uses" (calls a wrapper of it)
    how: str  # "asm", "string", "nvvm", "anchor", "intrinsic", "call"
    via: str = ""  # the wrapper a user calls, the intrinsic's name
    at: int = 0  # offset in the chunk's text (not stored): which definition holds it


def _strings_look_ptx(literal: str) -> bool:
    return any(ch in literal for ch in "%;[{$")


def extract(chunk: Chunk) -> list[Mention]:
    """The instructions ``chunk`` emits or wraps (role ``implements``, or ``uses`` for an
    example or tutorial): PTX in string literals, nvvm ops, PTX manual anchors, Gluon
    intrinsics. Callers of wrappers are found by ``build`` afterwards."""
    if chunk.language not in _CODE:
        return []
    role = "uses" if chunk.kind in _EXAMPLE_KINDS else "implements"
    found: dict[tuple[str, str], Mention] = {}

    def add(raw: str, how: str, via: str = "", key: str | None = None, at: int = 0) -> None:
        k = key or norm(raw)
        if k and (k, how) not in found:
            found[(k, how)] = Mention(k, raw, chunk.id, role, how, via, at)

    text = chunk.text
    in_asm = "asm" in text  # inline_asm, asm volatile, inline_asm_elementwise
    for lit in _STRING_RE.finditer(text):
        body = lit.group(0)[1:-1]
        if _FILE_NAME_RE.fullmatch(body):
            continue
        looks = _strings_look_ptx(body)
        for m in _INSTR_RE.finditer(body):
            if m.group("op") in _DISTINCT or looks:
                add(m.group(0), "asm" if in_asm else "string", at=lit.start())
        if looks and in_asm:
            for m in _BARE_RE.finditer(body):
                add(m.group(0), "asm", at=lit.start())
    if chunk.language == "python":
        for m in _NVVM_RE.finditer(text):
            name = m.group("name")
            if name.startswith(_NVVM_SKIP):
                continue
            add(f"nvvm.{name}", "nvvm", key=norm(_NVVM_ALIASES.get(name, name)), at=m.start())
        for path_part, name, ptx, _ in INTRINSICS:
            if path_part in chunk.path and name in chunk.defines:
                add(ptx, "intrinsic", via=name)
    for m in _ANCHOR_RE.finditer(text):
        key = _anchor_key(m.group("anchor"))
        if key:
            add(m.group("anchor"), "anchor", key=key, at=m.start())
    return list(found.values())


def _anchor_key(anchor: str) -> str:
    """The instruction a PTX manual anchor names: ``...-instructions-cp-async-bulk-tensor``
    -> ``cp_async_bulk_tensor``; ``tcgen05-mma-instructions-mma`` -> ``tcgen05_mma``."""
    if "instructions-" not in anchor and "instruction-" not in anchor:
        return ""
    head = anchor.split("-", 1)[0]
    tail = re.split(r"instructions?-", anchor)[-1]
    if tail.split("-", 1)[0] not in PTX_OPCODES:
        return ""
    if head in PTX_OPCODES and head != tail.split("-", 1)[0]:
        tail = f"{head}-{tail}"
    return norm(tail)


def _is_distinct_name(name: str) -> bool:
    bare = name.strip("_")
    if len(bare) < 6 or name.startswith("__") or name.lower() in _STOP_NAMES:
        return False
    return (
        "_" in bare
        or any(ch.isdigit() for ch in bare)
        or re.search(r"[a-z][A-Z]", bare) is not None
    )


def _owners(chunk: Chunk, at: int) -> list[str]:
    """The distinctive names ``chunk`` defines whose definition holds offset ``at``: in a
    chunk of several small functions, an instruction belongs to the one it is written in."""
    names = [n for n in chunk.defines if _is_distinct_name(n)]
    if len(chunk.defines) <= 1:
        return names
    starts = []
    for name in names:
        m = re.search(rf"(?<![\w.]){re.escape(name)}\b", chunk.text)
        if m is not None:
            starts.append((m.start(), name))
    before = [s for s in starts if s[0] <= at]
    return [max(before)[1]] if before else []
