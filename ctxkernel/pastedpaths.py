"""Paths inside a pasted error: the library files its frames and diagnostics name.

A traceback's frames (``File "/home/someone/.venv/.../site-packages/triton/language/
semantic.py", line 1234, in dot``), a compiler's header location
(``/usr/local/cutlass/include/cute/int_tuple.hpp(394): error: ...``, ``...hpp:394:12:``)
and MLIR's ``loc("/path/x.py":258:0)`` name files of the indexed corpora under someone
else's prefix. ``frames`` reads them out of the text, the most telling first: a Python
traceback's deepest frame (the one nearest the error) before the frames that called it,
then the compiler's locations in the order it printed them (its first error first).

``SuffixIndex`` maps such a path to a corpus file by the longest run of trailing path
parts that a corpus file ends with (``triton/language/semantic.py`` -> the triton
corpus's ``python/triton/language/semantic.py``; ``cute/int_tuple.hpp`` -> cutlass's
``include/cute/int_tuple.hpp``). A path whose longest such suffix ends more than one
file says nothing for sure and maps to none; so does a path of the user's own code,
whose trailing parts no corpus file ends with. ``frame_chunk`` picks the chunk of the
file a frame means: the one holding its line, else the one defining its function.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import pathrank
from .corpuscache import PerGeneration

if TYPE_CHECKING:
    from .corpuscache import CorpusCache

# trailing path parts a corpus file must share with a pasted path: one part alone (a file
# name: ``utils.py``, ``kernel.cu``) names the user's own files as often as a library's
MIN_PARTS = 2
MAX_FRAMES = 8  # library frames of one paste that are looked up (0: off)

_PY_FRAME = re.compile(r'File "(?P<path>[^"\n]+)", line (?P<line>\d+)(?:, in (?P<func>[\w<>.]+))?')
_EXTS = frozenset(
    {"py", "pyi", "hpp", "h", "hh", "hxx", "cuh", "cu", "cpp", "cc", "cxx", "c", "inl", "ipp"}
    | {"td", "mlir", "ptx"}
)
_MAX_PATH = 512  # characters of a path; a longer run of path characters is no path
# Every pattern below is linear in the text (a query may be 16,000 characters of anything):
# a run of path characters is found in one greedy pass and judged whole in Python, not
# matched by a pattern of nested repeats, which backtracked quadratically (3-4 s on
# 16,000 characters of "/a.a")
_RUN = re.compile(r"[\w.~+@/\\-]+")
# ``loc("/a/b.py":258:0)``, ``loc(callsite("/a/b.py":12:3 at ...))``
_MLIR = re.compile(r'"(?P<path>[^"\n]{1,512})":(?P<line>\d+)(?::\d+)?')
# what follows a path on a compiler's line: nvcc's ``(394)``, gcc/clang's ``:394:12``
_AFTER = re.compile(r"\((?P<paren>\d+)\)|:(?P<colon>\d+)")
# nvcc's ``detected during ... at line 84 of /a/b.cu``
_AT_LINE = re.compile(r'at line (?P<line>\d+) of "?(?P<path>[^\s"]{1,512})')


def _is_path(text: str) -> bool:
    """A file path with folders and one of the corpora's source extensions."""
    if len(text) > _MAX_PATH or not ("/" in text or "\\" in text):
        return False
    name = re.split(r"[/\\]", text)[-1]
    stem, dot, ext = name.rpartition(".")
    return bool(dot and stem and ext in _EXTS)


@dataclass(frozen=True)
class Frame:
    """A place a pasted error names: a path as the user's machine spelled it, the line
    and the function where the paste gives them."""

    path: str
    line: int = 0
    function: str = ""


def frames(text: str) -> list[Frame]:
    """The places the text names, the most telling first, each path once (its most
    telling place): Python frames from the deepest up, then the rest in printed order."""
    python = [
        Frame(m.group("path"), int(m.group("line")), _function(m.group("func") or ""))
        for m in _PY_FRAME.finditer(text)
    ]
    rest = _PY_FRAME.sub(" ", text)
    others: list[tuple[int, Frame]] = []
    for m in _MLIR.finditer(rest):
        if _is_path(m.group("path")):
            others.append((m.start(), Frame(m.group("path"), int(m.group("line")))))
    rest = _MLIR.sub(lambda m: " " * len(m.group(0)), rest)
    for m in _AT_LINE.finditer(rest):
        path = m.group("path").rstrip(".,;:")
        if _is_path(path):
            others.append((m.start(), Frame(path, int(m.group("line")))))
    for m in _RUN.finditer(rest):
        path = m.group(0).rstrip(".")
        if not _is_path(path):
            continue
        after = _AFTER.match(rest, m.start() + len(path))
        line = (after.group("paren") or after.group("colon")) if after else "0"
        others.append((m.start(), Frame(path, int(line))))
    others.sort(key=lambda e: e[0])
    seen: set[str] = set()
    out: list[Frame] = []
    for frame in [*reversed(python), *(f for _, f in others)]:
        if frame.path not in seen and not frame.path.startswith("<"):
            seen.add(frame.path)
            out.append(frame)
    return out


def _function(name: str) -> str:
    """A frame's function as a definition names it (``<module>`` names none)."""
    if name.startswith("<"):
        return ""
    return name.rsplit(".", 1)[-1]


def parts(path: str) -> list[str]:
    return [p for p in re.split(r"[/\\]+", path) if p and p != "."]


class SuffixIndex:
    """Every trailing run of at least ``MIN_PARTS`` parts of a corpus's file paths ->
    the file that ends with it, or None where several files do."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.files: dict[str, str | None] = {}
        for path in paths:
            p = parts(path)
            for n in range(MIN_PARTS, len(p) + 1):
                key = "/".join(p[-n:])
                self.files[key] = None if key in self.files else path


def resolve(path: str, indexes: dict[str, SuffixIndex]) -> tuple[str, str] | None:
    """(corpus, file) that the pasted ``path`` names by its longest suffix some corpus
    file ends with; None when no file does, or when that suffix ends several files (of
    one corpus or of several): a longer match decides, an equal one does not."""
    p = parts(path)
    for n in range(len(p), MIN_PARTS - 1, -1):
        key = "/".join(p[-n:])
        found = [(name, index.files[key]) for name, index in indexes.items() if key in index.files]
        if not found:
            continue
        name, file = found[0]
        return (name, file) if len(found) == 1 and file is not None else None
    return None


def frame_chunk(
    rows: Sequence[tuple[int, int, int, str, str]], frame: Frame, file_lines: int
) -> int | None:
    """The row of the chunk a frame means among a file's ``(row, start, end, symbol,
    defines)``: the smallest chunk holding its line when the line is within the file,
    else a chunk defining its function; None when neither (the caller picks by text)."""
    if frame.line and (not file_lines or frame.line <= file_lines):
        holding = [r for r in rows if r[1] <= frame.line <= r[2]]
        if holding:
            return min(holding, key=lambda r: r[2] - r[1])[0]
    if frame.function:
        for row, _, _, symbol, defines in rows:
            names = [*defines.split(), symbol.rsplit(".", 1)[-1]]
            if frame.function in names:
                return row
    return None


_INDEXES: PerGeneration[SuffixIndex] = PerGeneration()


def suffix_index(cache: CorpusCache, generation: str, paths: Iterable[str]) -> SuffixIndex:
    """The corpus's suffix index over ``paths`` (its searchable files), built once per
    index generation."""
    return _INDEXES.get(cache, generation, lambda: SuffixIndex(paths))


def library_rows(
    caches: dict[str, CorpusCache], text: str, tokens: Sequence[str]
) -> list[tuple[str, int]]:
    """(corpus, row) of the chunks the library frames of a pasted ``text`` mean, the most
    telling frame's first; a frame whose line and function say nothing stands in by its
    file's best body match for ``tokens`` (the message), else the file's first chunk."""
    found = frames(text)
    if not found:
        return []
    indexes: dict[str, SuffixIndex] = {}
    for name, cache in caches.items():
        generation = cache.get_info("generation") or ""
        paths = pathrank.path_index(cache, generation).paths
        indexes[name] = suffix_index(cache, generation, paths)
    out: list[tuple[str, int]] = []
    for frame in found[:MAX_FRAMES]:
        hit = resolve(frame.path, indexes)
        if hit is None:
            continue
        name, path = hit
        cache = caches[name]
        rows = cache.file_chunk_rows(path)
        if not rows:
            continue
        entry = cache.file(path)
        row = frame_chunk(rows, frame, entry.lines if entry else 0)
        if row is None:
            row = _best_body_row(cache, [r[0] for r in rows], tokens)
        if (name, row) not in out:
            out.append((name, row))
    return out


def _best_body_row(cache: CorpusCache, rows: list[int], tokens: Sequence[str]) -> int:
    """Of a file's chunk ``rows`` (in file order), the one with the best BM25 body score
    for ``tokens``; the first where none matches."""
    import numpy as np

    index = cache.bm25()
    if index is None or not tokens or not len(index.rows):
        return rows[0]
    where = np.flatnonzero(np.isin(index.rows, np.asarray(rows, dtype=np.int64)))
    if not len(where):
        return rows[0]
    scores = index.scores("body", list(tokens))[where]
    best = int(np.argmax(scores))
    return int(index.rows[where[best]]) if scores[best] > 0 else rows[0]
