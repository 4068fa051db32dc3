"""Concept links: from a PTX instruction to the code that emits or wraps it in the other
corpora (inline-PTX strings and ``asm volatile`` in CuTe headers, CuTeDSL ops and their
``nvvm``/``llvm`` wrappers, Triton/Gluon intrinsics) and to the code that calls those
wrappers (example kernels); and back, from a wrapper or a user to its PTX section.

Built at index time, one artifact per corpus (``lexical/<corpus>/links.sqlite``) from that
corpus's own chunks (its link-only sources' too: files kept for the links and never
searched, such as CUTLASS's ``include/cutlass/arch`` wrappers), stamped with the corpus's
generation. Beside the links the artifact keeps what they were made through (the wrapper
names and their instructions, the helpers, who calls each name): a re-index makes the
changed files' links again -- and those of the files whose links the change moves -- and
puts them in place of their old ones (``refresh``). A reader that finds a stamp other than the cache's rebuilds it before answering,
so a link never names a chunk the index no longer has. A link records the instruction as written
(``wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16``, ``nvvm.cp_async_bulk_tensor_...``)
as a normalised key; which PTX section it belongs to is decided when asked, against the
names the ``ptx`` corpus defines now (the longest one that prefixes the key), so
re-indexing the PTX manual never leaves the other corpora's links stale either.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import shutil
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import arch as archmod
from .corpus import Chunk
from .render import counted
from .symbols import PTX_OPCODES

if TYPE_CHECKING:
    from .store import CorpusCache, Store

LINKS_FILE = "links.sqlite"
PTX_CORPUS = "ptx"
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
# the qualifier's ``\w*+`` and ``\s*+`` never give back (a shorter qualifier is followed by
# a word character, never by ``.``/``::``: the same matches, without retrying each identifier
# at every length, which made this scan most of a cutlass index's concept-link time)
_IDENT_RE = re.compile(r"(?:(?P<qual>[A-Za-z_]\w*+)\s*+(?:\.|::)\s*)?(?P<name>[A-Za-z_]\w*)")
_TOKEN_RE = re.compile(r"[A-Za-z_]\w*")  # a superset of _IDENT_RE's names
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
USER_NAME_CAP = 400  # a wrapper name used in more chunks than this is too common to link by


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


# --- building ---------------------------------------------------------------------


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


# (family, name): a wrapper's name in one language family -- a Python wrapper's callers
# are Python, a C++ atom's are C++
Name = tuple[bool, str]
# name -> [(instruction key, chunk id, path)]: what a call of the name links to
Targets = dict[Name, list[tuple[str, str, str]]]
# chunk id -> (its row, [(name, qualifier)] of the linked names it calls)
Uses = dict[str, tuple[tuple[Any, ...], list[tuple[Name, str | None]]]]


@dataclass
class _Links:
    """A corpus's links and what they were made through. Kept in the artifact beside the
    links, so that a change to a few files is applied to them without reading the rest."""

    mentions: list[Mention]
    paths: dict[str, str]  # chunk id -> path, for every mention's chunk
    implementers: Targets
    helpers: Targets  # library names that call an implementer (the examples' second pass)
    present: set[str]  # the Gluon intrinsics' keys whose definitions are indexed
    intrinsic_paths: set[str]  # the files those definitions are in
    first: Uses  # the calls of implementers (every chunk)
    second: Uses  # the calls of helpers (examples)


def build(cache: CorpusCache) -> int:
    """(Re)build the link artifact of one corpus from its chunks; the number of links."""
    # the corpus's link-only sources (CUTLASS's arch headers) are linked like the rest
    rows = list(cache.iter_rows(_ROW_COLUMNS)) + list(cache.iter_link_rows(_ROW_COLUMNS))
    made = _make(rows, cache.corpus)
    _write_new(cache, made)
    return len(made.mentions)


def _make(rows: list[tuple[Any, ...]], corpus: str) -> _Links:
    own, implementers, present, intrinsic_paths = _own(rows, corpus)
    first = _scan(rows, corpus, implementers)
    firsts = _emit(first, _count(first), implementers, "call")
    helpers = _helpers(firsts, first, implementers)
    examples = [r for r in rows if (r[8] or "") in _EXAMPLE_KINDS]
    second = _scan(examples, corpus, helpers)
    mentions = [
        *own,
        *_intrinsic_calls(rows, corpus, present),
        *firsts,
        *_emit(second, _count(second), helpers, "call2"),
    ]
    paths = {f"{corpus}:{r[2]}:{r[3]}-{r[4]}": r[2] for r in rows}
    return _Links(mentions, paths, implementers, helpers, present, intrinsic_paths, first, second)


def _own(
    rows: list[tuple[Any, ...]], corpus: str
) -> tuple[list[Mention], Targets, set[str], set[str]]:
    """What each chunk emits or wraps itself (``extract``), the names it does that in
    (the implementers), and the Gluon intrinsics defined (keys, files)."""
    mentions: list[Mention] = []
    implementers: Targets = {}
    present: set[str] = set()
    intrinsic_paths: set[str] = set()
    for row in rows:
        chunk = _chunk_of(corpus, row)
        for m in extract(chunk):
            mentions.append(m)
            if m.how == "intrinsic":
                present.add(m.key)
                intrinsic_paths.add(chunk.path)
            if m.role != "implements" or m.how == "intrinsic":
                continue
            for name in _owners(chunk, m.at):
                family = (chunk.language == "python", name)
                implementers.setdefault(family, []).append((m.key, chunk.id, chunk.path))
    return mentions, implementers, present, intrinsic_paths


def _intrinsic_calls(rows: list[tuple[Any, ...]], corpus: str, present: set[str]) -> list[Mention]:
    """Calls of the Gluon intrinsics whose definitions are indexed."""
    # each call pattern spells its intrinsic's name: a text without it is not searched
    # (a pattern that starts with \b has no literal prefix for the regex engine to skip by)
    calls = [
        (re.compile(call), norm(ptx), f"{part}:{name}", name)
        for part, name, ptx, call in INTRINSICS
        if norm(ptx) in present
    ]
    out: list[Mention] = []
    for row in rows:
        text = row[9] or ""
        ident = f"{corpus}:{row[2]}:{row[3]}-{row[4]}"
        for pattern, key, via, name in calls:
            if name in text and pattern.search(text):
                out.append(Mention(key, name, ident, "uses", "call", via))
    return out


def _helpers(firsts: list[Mention], first: Uses, implementers: Targets) -> Targets:
    """The library names whose definitions call an implementer (a Hopper GEMM example
    builds its MMA through ``make_trivial_tiled_mma``, which makes the WGMMA op)."""
    helpers: Targets = {}
    for mention in firsts:
        row = first[mention.chunk_id][0]
        if (row[8] or "source") in _EXAMPLE_KINDS or (row[8] or "") == "test":
            continue
        names = [n for n in (row[6] or "").split() if _is_distinct_name(n)]
        if len(names) > 3:
            continue  # a chunk of many small definitions: which one calls it is unclear
        python = _is_python(row[7])
        for name in names:
            if (python, name) not in implementers:
                entry = (mention.key, mention.chunk_id, row[2])
                helpers.setdefault((python, name), []).append(entry)
    return helpers


def _scan(rows: list[tuple[Any, ...]], corpus: str, targets: Targets) -> Uses:
    """The chunks that call one of ``targets``' names (a chunk's own definitions aside),
    with the qualifier each is first called through."""
    uses: Uses = {}
    # the names each family has: a chunk none of whose tokens is one is skipped before
    # the identifier scan (most chunks; the scan was 10 of cutlass's 13 s of links)
    wanted = {py: {n for fam, n in targets if fam == py} for py in (False, True)}
    for row in rows:
        language = row[7] or ""
        if language not in _CODE and language != "notebook":
            continue
        python = _is_python(language)
        text = row[9] or ""
        family = wanted[python]
        if family.isdisjoint(_TOKEN_RE.findall(text)):
            continue  # every name _IDENT_RE finds is one of these tokens
        seen: dict[Name, str | None] = {}
        # (qualifier or "", name) of every identifier, in order, scanned in C
        for qual, bare in _IDENT_RE.findall(text):
            if bare not in family:
                continue
            name = (python, bare)
            if name not in seen or seen[name] is None:
                seen[name] = qual or None
        defined = set((row[6] or "").split())
        called = [(n, q) for n, q in seen.items() if n[1] not in defined]
        if called:
            uses[f"{corpus}:{row[2]}:{row[3]}-{row[4]}"] = (row, called)
    return uses


def _count(uses: Uses) -> dict[Name, int]:
    """How many chunks call each name."""
    counts: dict[Name, int] = {}
    for _, called in uses.values():
        for name, _ in called:
            counts[name] = counts.get(name, 0) + 1
    return counts


def _emit(uses: Uses, counts: dict[Name, int], targets: Targets, how: str) -> list[Mention]:
    """A ``uses`` link for each call of a name no more common than ``USER_NAME_CAP``, to
    the instructions the call means."""
    out: list[Mention] = []
    for ident, (row, called) in uses.items():
        for name, qual in called:
            if counts.get(name, 0) > USER_NAME_CAP:
                continue
            keys = _disambiguate(targets[name], qual, row[2])
            for key in sorted(k for k in keys if _fits_family(k, row[2])):
                out.append(Mention(key, name[1], ident, "uses", how, name[1]))
    return out


_ROW_COLUMNS = "row, id, path, start_line, end_line, symbol, defines, language, kind, text"
# the layout of the artifact's tables: another is built again before it is updated
ARTIFACT_VERSION = "3"


def _is_python(language: str | None) -> bool:
    return (language or "") in ("python", "notebook")


def _chunk_of(corpus: str, row: tuple[Any, ...]) -> Chunk:
    return Chunk(
        corpus=corpus,
        path=row[2],
        start_line=row[3],
        end_line=row[4],
        text=row[9] or "",
        symbol=row[5] or "",
        defines=tuple((row[6] or "").split()),
        language=row[7] or "text",
        kind=row[8] or "source",
    )


def refresh(cache: CorpusCache, changed: Iterable[str] | None) -> str:
    """Bring the link table up to date after an index run that wrote or removed the files
    ``changed`` (None: unknown). Their links are made again from their chunks and put in
    place of their old ones, with those of every file whose links the change moves (it
    calls, defines or spells a name that was defined or no longer, whose instruction
    changed or that crossed ``USER_NAME_CAP``); the rest of the table stays, since it is
    what a full build would find. The table is built again when a Gluon intrinsic's
    definition changed or the change spreads over more than ``_MAX_SCOPE`` files. Says
    which it did: "kept" (only its stamp moved), "updated" or "built"."""
    path = cache.directory / LINKS_FILE
    generation = cache.get_info("generation") or ""
    if changed is not None and path.exists():
        try:
            done = _apply(cache, path, set(changed), generation)
            if done:
                return done
        except (sqlite3.Error, ValueError, KeyError, TypeError):
            pass  # a damaged table: built again
    build(cache)
    return "built"


# how far a change may spread (files whose links it moves) before the table is built
# again instead: a wrapper header's names reach a few hundred callers at most
_MAX_SCOPE = 400
_MAX_ROUNDS = 6
_MAX_SPELLED = 40  # new names a change may bring before the table is built again instead


def _apply(cache: CorpusCache, path: Path, changed: set[str], generation: str) -> str:
    """Apply a change to these files to the table (a copy, swapped in): "updated", or
    "kept" when the table stays as it is; "" when it must be built again.

    The files whose links are made again start as the changed ones; when that moves what
    a name means (a wrapper defined or gone, its instruction, a helper, a name crossing
    ``USER_NAME_CAP``), the files that call, define or now spell that name join them,
    until no name moved outside them."""
    db = sqlite3.connect(path)
    try:
        info = dict(db.execute("SELECT key, value FROM info").fetchall())
        if info.get("generation") == generation:
            return "kept"
        if info.get("artifact") != ARTIFACT_VERSION:
            return ""
        if _inert(cache, db, info, changed):  # had no part in any link and have none now
            db.execute("UPDATE info SET value=? WHERE key='generation'", (generation,))
            db.commit()
            return "kept"
        old = _read_state(db, info)
        scope = set(changed)
        for _ in range(_MAX_ROUNDS):
            remade = _remake(cache, db, old, scope)
            if remade is None:
                return ""
            made, needed = remade
            if needed <= scope:
                break
            scope |= needed
            if len(scope) > _MAX_SCOPE:
                return ""
        else:
            return ""
        marks = ",".join("?" * len(scope))
        empty = not (
            made.mentions or made.implementers or made.helpers or made.first or made.second
        )
        if empty and not any(
            db.execute(
                f"SELECT 1 FROM {t} WHERE path IN ({marks}) LIMIT 1", sorted(scope)
            ).fetchone()
            for t in ("links", "names", "calls")
        ):  # the files had no part in any link and have none now: only the stamp moves
            db.execute("UPDATE info SET value=? WHERE key='generation'", (generation,))
            db.commit()
            return "kept"
    finally:
        db.close()
    # a name of its own: two readers that find the artifact stale may build it at once
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.copyfile(path, tmp)
    db = sqlite3.connect(tmp)
    try:
        for t in ("links", "names", "calls"):
            db.execute(f"DELETE FROM {t} WHERE path IN ({marks})", sorted(scope))
        _insert(db, made)
        db.execute("UPDATE info SET value=? WHERE key='generation'", (generation,))
        db.commit()
    finally:
        db.close()
    tmp.replace(path)
    return "updated"


def _remake(
    cache: CorpusCache, db: sqlite3.Connection, old: _State, scope: set[str]
) -> tuple[_Links, set[str]] | None:
    """The links of the files in ``scope`` made again against the rest of the table, and
    the files whose links the result would move (``scope`` itself when none outside);
    None when only a whole build can tell (a Gluon intrinsic's definition changed)."""
    cdb = cache.db()
    rows = _rows_of(cache, scope)
    corpus = cache.corpus
    own, implemented, present, intrinsic_paths = _own(rows, corpus)
    if present or intrinsic_paths or scope & old.intrinsic_paths:
        return None  # which intrinsics exist: every file's calls of them
    implementers = _merge(old.implementers, implemented, scope)
    moved = _moved(old.implementers, implementers, implemented, scope)
    first = _scan(rows, corpus, implementers)
    counts, crossed = _recount(_call_counts(db, 1, scope), first)
    firsts = _emit(first, counts, implementers, "call")
    helping = _helpers(firsts, first, implementers)
    helpers = _merge(old.helpers, helping, scope)
    moved_helpers = _moved(old.helpers, helpers, helping, scope)
    second = _scan([r for r in rows if (r[8] or "") in _EXAMPLE_KINDS], corpus, helpers)
    counts2, crossed2 = _recount(_call_counts(db, 2, scope), second)
    made = _Links(
        [
            *own,
            *_intrinsic_calls(rows, corpus, old.present),
            *firsts,
            *_emit(second, counts2, helpers, "call2"),
        ],
        {f"{corpus}:{r[2]}:{r[3]}-{r[4]}": r[2] for r in rows},
        implemented,
        helping,
        old.present,
        old.intrinsic_paths,
        first,
        second,
    )
    spelled = [n for n in moved - set(old.implementers)] + [
        n for n in moved_helpers - set(old.helpers)
    ]
    if len(spelled) > _MAX_SPELLED:
        return None  # many new names: finding who spells each is a whole build's reading
    needed = set(scope) | _reached(db, cdb, moved | moved_helpers, {1: crossed, 2: crossed2})
    for name in moved - set(old.implementers):  # new names: whoever spells them
        needed |= _spelling(cdb, name[1], examples=False)
    for name in moved_helpers - set(old.helpers):
        needed |= _spelling(cdb, name[1], examples=True)
    return made, needed


def _inert(
    cache: CorpusCache, db: sqlite3.Connection, info: dict[str, str], changed: set[str]
) -> bool:
    """The shortcut for most changes (half of cutlass's files make no link): no row of
    the table comes from these files, and their chunks now emit or wrap nothing and
    spell no linked name (of either pass) and no Gluon intrinsic's call -- what
    ``_remake`` would find, without reading the whole state."""
    marks = ",".join("?" * len(changed))
    if not changed or any(
        db.execute(f"SELECT 1 FROM {t} WHERE path IN ({marks}) LIMIT 1", sorted(changed)).fetchone()
        for t in ("links", "names", "calls")
    ):
        return False
    rows = _rows_of(cache, changed)
    if _own(rows, cache.corpus)[0]:
        return False
    if _intrinsic_calls(rows, cache.corpus, set(json.loads(info["present"]))):
        return False
    names = {str(n) for (n,) in db.execute("SELECT DISTINCT name FROM names")}
    code = (r for r in rows if (r[7] or "") in _CODE or (r[7] or "") == "notebook")
    return all(names.isdisjoint(_TOKEN_RE.findall(r[9] or "")) for r in code)


def _rows_of(cache: CorpusCache, paths: set[str]) -> list[tuple[Any, ...]]:
    """The chunk rows (searched, then link-only) of these files, in row order."""
    if not paths:
        return []
    marks = ",".join("?" * len(paths))
    cdb = cache.db()
    rows: list[tuple[Any, ...]] = []
    for table_name in ("chunks", "link_chunks"):
        rows += cdb.execute(
            f"SELECT {_ROW_COLUMNS} FROM {table_name} WHERE path IN ({marks}) ORDER BY row",
            sorted(paths),
        ).fetchall()
    return rows


def _reached(
    db: sqlite3.Connection,
    cdb: sqlite3.Connection,
    moved: set[Name],
    crossed: dict[int, set[Name]],
) -> set[str]:
    """The files whose links the moved names reach: those with an entry for one or a call
    of one, those whose chunks define one (whether a definition is a helper depends on
    whether the name is an implementer), and the callers of a name that crossed the cap.
    One pass over each table, however many names moved (a header of a thousand atoms
    removed moves a thousand)."""
    out: set[str] = set()
    if not moved and not any(crossed.values()):
        return out
    for python, name, path in db.execute("SELECT python, name, path FROM names"):
        if (bool(python), name) in moved:
            out.add(path)
    for stage, python, name, path in db.execute("SELECT pass, python, name, path FROM calls"):
        key = (bool(python), name)
        if key in moved or key in crossed.get(stage, ()):
            out.add(path)
    words = {n for _, n in moved}
    if words:
        for table_name in ("chunks", "link_chunks"):
            for path, defines in cdb.execute(f"SELECT path, defines FROM {table_name}"):
                if defines and not words.isdisjoint(defines.split()):
                    out.add(path)
    return out


def _spelling(cdb: sqlite3.Connection, word: str, *, examples: bool) -> set[str]:
    """The files with a chunk whose text holds ``word`` (examples only: the second pass)."""
    out: set[str] = set()
    for table_name in ("chunks", "link_chunks"):
        query = f"SELECT DISTINCT path FROM {table_name} WHERE instr(text, ?) > 0"
        if examples:
            query += " AND kind IN ('example', 'tutorial')"
        out |= {p for (p,) in cdb.execute(query, (word,))}
    return out


@dataclass
class _State:
    """What a table's links were made through (read back from its artifact)."""

    implementers: Targets
    helpers: Targets
    present: set[str]
    intrinsic_paths: set[str]


def _read_state(db: sqlite3.Connection, info: dict[str, str]) -> _State:
    targets: dict[str, Targets] = {"implementer": {}, "helper": {}}
    for kind, python, name, key, chunk_id, path in db.execute(
        "SELECT kind, python, name, key, chunk_id, path FROM names ORDER BY rowid"
    ):
        targets[kind].setdefault((bool(python), name), []).append((key, chunk_id, path))
    return _State(
        targets["implementer"],
        targets["helper"],
        set(json.loads(info["present"])),
        set(json.loads(info["intrinsic_paths"])),
    )


def _call_counts(
    db: sqlite3.Connection, stage: int, scope: set[str]
) -> dict[Name, tuple[int, int]]:
    """name -> (chunks that call it in pass ``stage``, those of them in ``scope``)."""
    marks = ",".join("?" * len(scope))
    return {
        (bool(python), name): (int(total), int(mine or 0))
        for python, name, total, mine in db.execute(
            f"SELECT python, name, COUNT(*), SUM(path IN ({marks})) FROM calls WHERE pass=?"
            " GROUP BY python, name",
            (*sorted(scope), stage),
        )
    }


def _merge(old: Targets, new: Targets, changed: set[str]) -> Targets:
    """``old`` with the changed files' entries replaced by ``new``'s."""
    out: Targets = {}
    for name, entries in old.items():
        kept = [e for e in entries if e[2] not in changed]
        if kept:
            out[name] = kept
    for name, entries in new.items():
        out.setdefault(name, []).extend(entries)
    return out


def _moved(old: Targets, now: Targets, new: Targets, scope: set[str]) -> set[Name]:
    """The names a call of which resolves otherwise now (``_disambiguate`` reads the keys
    and paths of a name's entries): only names the files in ``scope`` had or have entries
    for can have moved."""
    names = set(new) | {n for n, entries in old.items() if any(e[2] in scope for e in entries)}
    return {
        n
        for n in names
        if {(k, p) for k, _, p in old.get(n, ())} != {(k, p) for k, _, p in now.get(n, ())}
    }


def _recount(old: dict[Name, tuple[int, int]], new: Uses) -> tuple[dict[Name, int], set[Name]]:
    """The callers per name after the change, and the names that crossed
    ``USER_NAME_CAP`` (their calls elsewhere are linked now, or no longer)."""
    counts = {name: total - mine for name, (total, mine) in old.items()}
    for name, n in _count(new).items():
        counts[name] = counts.get(name, 0) + n
    crossed = {
        name
        for name in set(counts) | set(old)
        if (counts.get(name, 0) > USER_NAME_CAP) != (old.get(name, (0, 0))[0] > USER_NAME_CAP)
    }
    return counts, crossed


def _disambiguate(targets: list[tuple[str, str, str]], qual: str | None, path: str) -> set[str]:
    """The keys a call of a name means. The same name in two modules (warpgroup and
    tcgen05 both have ``MmaF16BF16Op``): the caller's qualifier says which, else the
    architecture of the caller's path (a ``hopper/`` example means the sm90 one)."""
    keys = {k for k, _, _ in targets}
    if len(keys) <= 1 or len({p for _, _, p in targets}) <= 1:
        return keys
    if qual:
        chosen = {k for k, _, p in targets if f"/{qual}/" in p or p.endswith(f"/{qual}.py")}
        if chosen:
            return chosen
    mine = _loose_arch(path)
    if mine:
        # an implementer's architecture: its path's and its instruction's (wgmma: sm90)
        return {k for k, _, p in targets if _loose_arch(f"{p} {k}") & mine}
    return set()


_LOOSE_ARCH = re.compile(r"sm_?(\d{2,3})|(ampere|hopper|blackwell|wgmma|gmma|tcgen05|umma)", re.I)
_ARCH_OF_WORD = {
    "ampere": 80, "hopper": 90, "blackwell": 100, "wgmma": 90, "gmma": 90, "tcgen05": 100,
    "umma": 100,
}  # fmt: skip


def _fits_family(key: str, path: str) -> bool:
    """A family-only instruction (wgmma: sm_90a, tcgen05: sm_100a) is not what code for
    another family calls: a Blackwell example's ``make_trivial_tiled_mma`` is not WGMMA."""
    own = {n // 10 for n in _loose_arch(key.split("_", 1)[0])}
    if not own or key.split("_", 1)[0] not in ("wgmma", "tcgen05"):
        return True
    caller = {n // 10 for n in _loose_arch(path)}
    return not caller or bool(own & caller)


def _loose_arch(text: str) -> set[int]:
    """Architectures a path names, inside words too (``hopper_helpers.py``, ``mma_sm90``)."""
    found = set()
    for num, word in _LOOSE_ARCH.findall(text):
        found.add(int(num) if num else _ARCH_OF_WORD[word.lower()])
    return found


def _write_new(cache: CorpusCache, made: _Links) -> None:
    path = cache.directory / LINKS_FILE
    # a name of its own: two readers that find the artifact stale may build it at once
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    try:
        db.executescript(
            "CREATE TABLE links(key TEXT, raw TEXT, chunk_id TEXT, role TEXT, how TEXT, via TEXT,"
            " path TEXT);"
            "CREATE TABLE names(kind TEXT, python INTEGER, name TEXT, key TEXT, chunk_id TEXT,"
            " path TEXT);"
            "CREATE TABLE calls(pass INTEGER, python INTEGER, name TEXT, chunk_id TEXT,"
            " path TEXT);"
            "CREATE TABLE info(key TEXT PRIMARY KEY, value TEXT);"
            "CREATE INDEX links_key ON links(key);"
            "CREATE INDEX links_chunk ON links(chunk_id);"
        )
        _insert(db, made)
        info = {
            "generation": cache.get_info("generation") or "",
            "artifact": ARTIFACT_VERSION,
            "present": json.dumps(sorted(made.present)),
            "intrinsic_paths": json.dumps(sorted(made.intrinsic_paths)),
        }
        db.executemany("INSERT INTO info VALUES(?, ?)", sorted(info.items()))
        db.commit()
    finally:
        db.close()
    tmp.replace(path)


def _insert(db: sqlite3.Connection, made: _Links) -> None:
    """The rows of ``made`` (a whole corpus's, or the changed files')."""
    db.executemany(
        "INSERT INTO links VALUES(?,?,?,?,?,?,?)",
        [
            (m.key, m.raw, m.chunk_id, m.role, m.how, m.via, made.paths[m.chunk_id])
            for m in made.mentions
        ],
    )
    db.executemany(
        "INSERT INTO names VALUES(?,?,?,?,?,?)",
        [
            (kind, int(python), name, key, chunk_id, path)
            for kind, targets in (("implementer", made.implementers), ("helper", made.helpers))
            for (python, name), entries in targets.items()
            for key, chunk_id, path in entries
        ],
    )
    db.executemany(
        "INSERT INTO calls VALUES(?,?,?,?,?)",
        [
            (stage, int(python), name, ident, row[2])
            for stage, uses in ((1, made.first), (2, made.second))
            for ident, (row, called) in uses.items()
            for (python, name), _ in called
        ],
    )


def table(cache: CorpusCache) -> sqlite3.Connection:
    """The corpus's link table, rebuilt first when it is missing or older than the cache."""
    path = cache.directory / LINKS_FILE
    generation = cache.get_info("generation") or ""
    if path.exists():
        db = sqlite3.connect(path)
        row = db.execute("SELECT value FROM info WHERE key='generation'").fetchone()
        if row and row[0] == generation:
            return db
        db.close()
    build(cache)
    return sqlite3.connect(path)


def rows(db: sqlite3.Connection) -> tuple[list[Any], ...]:
    """Everything a link table holds, comparable between two builds: each chunk's links in
    their order, the names, calls and info as sorted lists (an applied update must equal a
    full build row for row)."""
    return (
        db.execute("SELECT * FROM links ORDER BY chunk_id, rowid").fetchall(),
        sorted(db.execute("SELECT * FROM names").fetchall()),
        sorted(db.execute("SELECT * FROM calls").fetchall()),
        sorted(db.execute("SELECT * FROM info").fetchall()),
    )


# --- resolving --------------------------------------------------------------------


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
    from . import symbols

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


def pick(links: list[Link], per_group: int = 3, per_file: int = 1) -> list[Link]:
    """At most ``per_group`` links of each group, ``per_file`` of each file: a header with
    eighty WGMMA atoms is one entry, not eighty."""
    shown: list[Link] = []
    groups: dict[str, int] = {}
    files: dict[tuple[str, str, str], int] = {}
    for link in links:
        fkey = (link.group, link.chunk.corpus, link.chunk.path)
        if groups.get(link.group, 0) >= per_group or files.get(fkey, 0) >= per_file:
            continue
        groups[link.group] = groups.get(link.group, 0) + 1
        files[fkey] = files.get(fkey, 0) + 1
        shown.append(link)
    return shown


def render_lines(links: list[Link], total: int | None = None, urls: bool = True) -> list[str]:
    """The "implemented by / used in" block: one heading per group, one line per link."""
    if not links:
        return []
    lines = ["implemented by / used in:"]
    group = None
    for link in links:
        if link.group != group:
            group = link.group
            lines.append(f"  {group}:")
        label = link.chunk.symbol or link.chunk.title or link.via
        arch = archmod.label(link.chunk)
        via = link.via.rsplit(":", 1)[-1]
        what = f"{link.role} {link.concept}" + (f" via {via}" if via and via != label else "")
        lines.append(
            f"    {link.chunk.id}  {label[:60]}  [{what}{', ' + arch if arch else ''}]"
            + (f"  {link.chunk.url}" if link.chunk.url and urls else "")
        )
    if total is not None and total > len(links):
        more = counted(total - len(links), "more link")
        lines.append(f"  ({more}; `ctxkernel related ID` for one hit's)")
    return lines
