"""Shared piece plumbing: packing a line range into parts, filling gaps, enforcing limits.

Every structural chunker finds units (a function, a section) and then needs the same
three things: split a unit that is too long at the best boundaries it offers
(``pack``), give the lines between units to glue pieces so nothing non-blank is lost
(``fill_gaps``), and make the final list sorted, trimmed and under the character limit
(``finalize``). Line numbers here are always 1-based and inclusive.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import replace

from ..boilerplate import is_license_line, license_lines
from .base import MAX_CHUNK_CHARS, Piece

# A glue run with at most this many non-blank lines is folded into a neighbouring
# piece instead of becoming a piece of its own (a lone `} // namespace cute`).
TINY_GLUE_LINES = 3
TITLE_CHARS = 200
DOC_CHARS = 400

GlueFactory = Callable[[int, int], Piece]
RunTest = Callable[[int, int], bool]
_CLOSERS = ("}", "#endif", ")")


def is_blank(line: str) -> bool:
    return not line.strip()


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when it was longer."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def one_line(text: str, limit: int = TITLE_CHARS) -> str:
    """Whitespace collapsed to single spaces and clipped: the form of every title."""
    return clip(" ".join(text.split()), limit)


def tidy_signature(text: str, limit: int = TITLE_CHARS) -> str:
    """A multi-line signature as one line: ``f( a, b, )`` -> ``f(a, b)``."""
    text = " ".join(text.split())
    text = re.sub(r"([(\[])\s+", r"\1", text)
    text = re.sub(r",?\s+([)\]])", r"\1", text)
    return clip(text, limit)


def part_title(title: str, k: int, n: int) -> str:
    return title if n <= 1 else f"{title} (part {k}/{n})"


def pack(
    start: int,
    end: int,
    max_lines: int,
    cuts: Iterable[int] = (),
    weak_cuts: Iterable[int] = (),
    lines: list[str] | None = None,
) -> list[tuple[int, int]]:
    """Split ``start..end`` into consecutive ranges of at most ``max_lines`` lines.

    A cut ``c`` means "a range may end at line c". Ranges end at a cut where one fits,
    falling back to ``weak_cuts`` and then to a plain window. The fewest ranges are
    used, and among those the most even ones (a 121-line function becomes 61 + 60
    lines, not 120 + 1). Given ``lines``, a range's length leaves out blank lines at its
    ends, since pieces are trimmed.
    """
    max_lines = max(1, max_lines)
    strong = sorted({c for c in cuts if start <= c < end})
    weak = sorted({c for c in weak_cuts if start <= c < end})

    def extent(s: int, e: int) -> tuple[int, int]:
        return (s, e) if lines is None else trim(lines, s, e)

    def length(s: int, e: int) -> int:
        a, b = extent(s, e)
        return max(0, b - a + 1)

    def furthest(candidates: list[int], s: int, limit: int) -> int | None:
        """The last cut at or after ``s`` whose range from ``s`` has text and fits."""
        lo, hi = bisect.bisect_left(candidates, s), len(candidates)
        while lo < hi:  # first index whose range is too long
            mid = (lo + hi) // 2
            if length(s, candidates[mid]) <= limit:
                lo = mid + 1
            else:
                hi = mid
        k = lo - 1
        if k >= 0 and candidates[k] >= s and length(s, candidates[k]) > 0:
            return candidates[k]
        return None

    def run(limit: int) -> tuple[list[tuple[int, int]], int]:
        """Greedy ranges under ``limit``, and a penalty for each cut that is not strong."""
        out: list[tuple[int, int]] = []
        penalty = 0
        s = start
        while length(s, end) > limit:
            cut = furthest(strong, s, limit)
            if cut is None:
                cut = furthest(weak, s, limit)
                penalty += 1
            if cut is None:
                cut = extent(s, end)[0] + limit - 1
                penalty += len(strong) + len(weak) + 1
            out.append((s, cut))
            s = cut + 1
        out.append((s, end))
        return out, penalty

    total = length(start, end)
    if total <= max_lines:
        return [(start, end)]
    best, worst_penalty = run(max_lines)

    def as_good(limit: int) -> bool:
        ranges, penalty = run(limit)
        return len(ranges) <= len(best) and penalty <= worst_penalty

    lo, hi = math.ceil(total / len(best)), max_lines
    while lo < hi:  # the smallest limit that is no worse: the most even split
        mid = (lo + hi) // 2
        if as_good(mid):
            hi = mid
        else:
            lo = mid + 1
    return run(lo)[0] if as_good(lo) else best


def blank_cuts(lines: list[str], start: int, end: int) -> list[int]:
    """Lines after which a blank line follows: paragraph-like boundaries in ``start..end``."""
    return [ln for ln in range(start, end) if is_blank(lines[ln])]


def trim(lines: list[str], start: int, end: int) -> tuple[int, int]:
    """``start..end`` without leading and trailing blank lines; start > end if all blank."""
    start = max(start, 1)
    end = min(end, len(lines))
    while start <= end and is_blank(lines[start - 1]):
        start += 1
    while end >= start and is_blank(lines[end - 1]):
        end -= 1
    return start, end


def fill_gaps(
    lines: list[str],
    pieces: list[Piece],
    max_lines: int,
    glue: GlueFactory,
    *,
    lo: int = 1,
    hi: int | None = None,
    cuts: Iterable[int] = (),
    foldable: RunTest | None = None,
) -> list[Piece]:
    """``pieces`` plus glue pieces for every non-blank line of ``lo..hi`` they leave out.

    ``pieces`` must be disjoint raw-line pieces. A tiny run (a closing brace, a lone
    ``namespace x {``) is folded into the piece before it when it opens with a closing
    brace or nothing follows, else into the piece after it, as long as that piece stays
    within ``max_lines``; ``foldable(start, end)`` overrides what counts as tiny. Other
    runs become glue pieces made by ``glue(start, end)``, packed at ``cuts`` and blank
    lines.
    """
    hi = len(lines) if hi is None else hi
    ordered = sorted((_trimmed(lines, p) for p in pieces), key=lambda p: (p.start_line, p.end_line))
    cut_list = sorted(set(cuts))
    out: list[Piece] = []
    pos = lo
    for i in range(len(ordered) + 1):
        nxt = ordered[i] if i < len(ordered) else None
        gap_end = (nxt.start_line - 1) if nxt is not None else hi
        s, e = trim(lines, pos, min(gap_end, hi))
        if s <= e:
            prev = out[-1] if out else None
            tiny = foldable(s, e) if foldable is not None else _tiny(lines, s, e)
            nxt = _place_run(lines, s, e, tiny, prev, nxt, max_lines, glue, cut_list, out)
        if nxt is None:
            break
        out.append(nxt)
        pos = max(pos, nxt.end_line + 1)
    return out


def _trimmed(lines: list[str], p: Piece) -> Piece:
    """``p`` without blank lines at its ends (when it has text at all)."""
    if p.text is not None:
        return p
    s, e = trim(lines, p.start_line, p.end_line)
    return (
        p if s > e or (s, e) == (p.start_line, p.end_line) else replace(p, start_line=s, end_line=e)
    )


def _place_run(
    lines: list[str],
    s: int,
    e: int,
    tiny: bool,
    prev: Piece | None,
    nxt: Piece | None,
    max_lines: int,
    glue: GlueFactory,
    cuts: list[int],
    out: list[Piece],
) -> Piece | None:
    """Fold the run ``s..e`` into a neighbour or append glue to ``out``; returns ``nxt``."""
    if tiny:
        # Closing lines (up to the last one) go to the piece before, the rest to the next.
        split = s - 1
        for ln in range(s, e + 1):
            if lines[ln - 1].lstrip().startswith(_CLOSERS):
                split = ln
        head, tail = trim(lines, s, split), trim(lines, split + 1, e)

        def prev_takes(end: int) -> bool:
            return prev is not None and prev.text is None and end - prev.start_line < max_lines

        def next_takes(start: int) -> bool:
            return nxt is not None and nxt.text is None and nxt.end_line - start < max_lines

        if head[0] <= head[1] and prev is not None and prev_takes(head[1]):
            out[-1] = prev = replace(prev, end_line=head[1])
            head = (0, -1)
        if tail[0] <= tail[1]:
            if nxt is not None and next_takes(tail[0]):
                nxt, tail = replace(nxt, start_line=tail[0]), (0, -1)
            elif head[0] > head[1] and prev is not None and prev_takes(tail[1]):
                out[-1] = replace(prev, end_line=tail[1])
                tail = (0, -1)
        if head[0] <= head[1] and tail[0] > tail[1] and nxt is not None and next_takes(head[0]):
            nxt, head = replace(nxt, start_line=head[0]), (0, -1)
        left = [r for r in (head, tail) if r[0] <= r[1]]
        if not left:
            return nxt
        s, e = left[0][0], left[-1][1]
    lo = bisect.bisect_left(cuts, s)
    hi = bisect.bisect_left(cuts, e)
    run_cuts = cuts[lo:hi] + blank_cuts(lines, s, e)
    for ps, pe in pack(s, e, max_lines, run_cuts, lines=lines):
        ps, pe = trim(lines, ps, pe)
        if ps <= pe:
            out.append(glue(ps, pe))
    return nxt


def _tiny(lines: list[str], s: int, e: int) -> bool:
    return sum(1 for ln in range(s, e + 1) if not is_blank(lines[ln - 1])) <= TINY_GLUE_LINES


def finalize(pieces: Iterable[Piece], lines: list[str], *, trim_blank: bool = True) -> list[Piece]:
    """Pieces sorted by line, blank-only ones dropped, each within MAX_CHUNK_CHARS."""
    out: list[Piece] = []
    for p in pieces:
        if p.text is not None:
            if p.text.strip():
                # Chunkers that build their own text split it themselves; this is a backstop.
                out.append(replace(p, text=p.text[:MAX_CHUNK_CHARS]))
            continue
        s, e = max(p.start_line, 1), min(p.end_line, len(lines))
        if trim_blank:
            s, e = trim(lines, s, e)  # a trimmed range that is not empty has text
        elif not any(line.strip() for line in lines[s - 1 : e]):
            continue
        if s > e:
            continue
        out.extend(_limit_chars(replace(p, start_line=s, end_line=e), lines))
    out.sort(key=lambda p: (p.start_line, p.end_line))
    return out


def _limit_chars(p: Piece, lines: list[str]) -> list[Piece]:
    """``p`` split by lines so each part's text fits MAX_CHUNK_CHARS."""
    size = sum(map(len, lines[p.start_line - 1 : p.end_line])) + p.end_line - p.start_line
    if size <= MAX_CHUNK_CHARS:
        return [p]
    out: list[Piece] = []
    s = p.start_line
    used = -1
    for ln in range(p.start_line, p.end_line + 1):
        n = len(lines[ln - 1])
        if n > MAX_CHUNK_CHARS:
            if s < ln:
                out.append(replace(p, start_line=s, end_line=ln - 1))
            # A single line longer than the limit (minified code, a data blob) is
            # truncated: one piece per line keeps hit ids unique, and such a line
            # carries little a search could use past its first 12k characters.
            out.append(replace(p, start_line=ln, end_line=ln, text=lines[ln - 1][:MAX_CHUNK_CHARS]))
            s, used = ln + 1, -1
            continue
        if used + 1 + n > MAX_CHUNK_CHARS:
            out.append(replace(p, start_line=s, end_line=ln - 1))
            s, used = ln, -1
        used += 1 + n
    if s <= p.end_line:
        out.append(replace(p, start_line=s, end_line=p.end_line))
    return [q for q in out if q.text is not None or _has_text(q, lines)]


def _has_text(p: Piece, lines: list[str]) -> bool:
    return any(not is_blank(lines[ln - 1]) for ln in range(p.start_line, p.end_line + 1))


def first_line(lines: list[str], start: int, end: int) -> str:
    """A title for ``start..end``: its first line with a word in it (rulers skipped)."""
    fallback = ""
    top = start + license_lines(lines[start - 1 : end])  # a license header is no title
    for ln in range(top, min(end, len(lines)) + 1):
        line = lines[ln - 1]
        if is_license_line(line):
            continue
        if any(c.isalnum() for c in line):
            return one_line(line)
        if not fallback and line.strip():
            fallback = one_line(line)
    return fallback
