"""Making a corpus's links from its chunk rows: what each chunk emits or wraps
(``mentions.extract``) and the names it does that in (the implementers), the chunks that
call those names, the library helpers built on them that the examples call in turn, and
each call resolved to the instructions it means (by qualifier or architecture). Pure: the
rows in, the links and what they were made through (``_Links``) out; ``table`` stores
them, ``refresh`` remakes a few files' against the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..corpus import Chunk
from .mentions import (
    _CODE,
    _EXAMPLE_KINDS,
    INTRINSICS,
    Mention,
    _is_distinct_name,
    _owners,
    extract,
    norm,
)

# the qualifier's ``\w*+`` and ``\s*+`` never give back (a shorter qualifier is followed by
# a word character, never by ``.``/``::``: the same matches, without retrying each identifier
# at every length, which made this scan most of a cutlass index's concept-link time)
_IDENT_RE = re.compile(r"(?:(?P<qual>[A-Za-z_]\w*+)\s*+(?:\.|::)\s*)?(?P<name>[A-Za-z_]\w*)")
_TOKEN_RE = re.compile(r"[A-Za-z_]\w*")  # a superset of _IDENT_RE's names
USER_NAME_CAP = 400  # a wrapper name used in more chunks than this is too common to link by


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


# beside _emit: the two readers of USER_NAME_CAP share its one home
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


_ROW_COLUMNS = "row, id, path, start_line, end_line, symbol, defines, language, kind, text"


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
