"""The lines chunker: fixed windows of ``max_lines`` lines, and every other chunker's fallback.

Windows do not overlap and the last one is shorter; windows with nothing but blank
lines are dropped, so an empty or whitespace-only file gives no pieces.
"""

from __future__ import annotations

from ._merge import finalize, first_line
from .base import DEFAULT_MAX_LINES, Piece


def chunk(text: str, path: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Piece]:
    """Cut ``text`` into consecutive windows of ``max_lines`` lines."""
    lines = text.splitlines()
    if not text.strip():
        return []
    step = max(1, max_lines)
    pieces = []
    for start in range(1, len(lines) + 1, step):
        end = min(start + step - 1, len(lines))
        pieces.append(Piece(start, end, title=first_line(lines, start, end)))
    return finalize(pieces, lines, trim_blank=False)
