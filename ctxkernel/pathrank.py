"""Path ranking: files whose folder and file names say what the query asks for.

Example folders and files are named after what they do (``blackwell/kernel/dense_gemm/``,
``77_blackwell_fmha/``, ``02-layouts.py``): for "an example of grouped GEMM on Blackwell"
those names carry most of the signal, and a BM25 over whole chunks or files dilutes them
in the code. ``PathIndex`` scores every file of a corpus by the query words its path
holds, each weighted by how rare it is among the corpus's paths, and stands each file in
by its first chunk.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .corpuscache import PerGeneration

if TYPE_CHECKING:
    from .corpuscache import CorpusCache

_SEGMENT = re.compile(r"[/\\\s.,:;()\[\]{}'\"`?!<>|]+")
_PART = re.compile(r"[_\-+=*&#@]+")
# words every request has and no path needs
STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "for",
        "in",
        "on",
        "with",
        "to",
        "how",
        "do",
        "i",
        "is",
        "are",
        "there",
        "where",
        "what",
        "which",
        "show",
        "me",
        "find",
        "example",
        "examples",
        "sample",
        "samples",
        "code",
        "kernel",
        "kernels",
        "tutorial",
        "tutorials",
        "demo",
        "using",
        "use",
        "that",
        "this",
        "it",
        "its",
        "by",
        "from",
        "as",
        "or",
        "be",
        "can",
        "my",
        "want",
        "need",
    ]
)
_INDEXES: PerGeneration[PathIndex] = PerGeneration()


def _norm(w: str) -> str:
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def words(text: str, pairs: bool = False) -> list[str]:
    """Lower-case words of a path or a query: ``dense_gemm_fp8`` -> dense, gemm, fp8 and
    the joined densegemmfp8; with ``pairs`` also each two neighbouring words joined, so
    "CuTe DSL" meets ``CuTeDSL`` and "dense GEMM" meets ``dense_gemm``."""
    out: list[str] = []
    for segment in _SEGMENT.split(text):
        parts = [p.lower() for p in _PART.split(segment) if p]
        out.extend(_norm(p) for p in parts)
        if len(parts) > 1:
            out.append(_norm("".join(parts)))
    if pairs:
        plain = [w for w in out if w not in STOP]
        out.extend(_norm(a + b) for a, b in itertools.pairwise(plain))
    return out


@dataclass
class PathIndex:
    paths: list[str]
    rows: list[int]  # each file's first chunk
    words: list[frozenset[str]]
    idf: dict[str, float]

    @classmethod
    def build(cls, cache: CorpusCache) -> PathIndex:
        first: dict[str, tuple[int, int]] = {}
        for row, path, start in cache.iter_rows("row, path, start_line"):
            held = first.get(path)
            if held is None or int(start) < held[1]:
                first[path] = (int(row), int(start))
        paths = sorted(first)
        sets = [frozenset(words(p)) for p in paths]
        df: dict[str, int] = {}
        for s in sets:
            for w in s:
                df[w] = df.get(w, 0) + 1
        n = len(paths)
        idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}
        return cls(paths, [first[p][0] for p in paths], sets, idf)

    def rank(self, query: str, depth: int, min_words: int = 2) -> list[tuple[float, int]]:
        """(score, row) of the files whose path holds at least ``min_words`` of the
        query's words, best first; the score is the share of the query's word weight the
        path holds."""
        q = {w for w in words(query, pairs=True) if w not in STOP and w in self.idf}
        if len(q) < min_words:
            return []
        total = sum(self.idf[w] for w in q)
        scored = []
        for i, s in enumerate(self.words):
            common = q & s
            if len(common) >= min_words:
                # shorter paths first among equals: the folder's own file, not a deep one
                score = sum(self.idf[w] for w in common) / total - 0.001 * len(s)
                scored.append((score, self.rows[i]))
        scored.sort(key=lambda e: -e[0])
        return scored[:depth]


def path_index(cache: CorpusCache, generation: str) -> PathIndex:
    """The corpus's path index, built once per index generation."""
    return _INDEXES.get(cache, generation, lambda: PathIndex.build(cache))
