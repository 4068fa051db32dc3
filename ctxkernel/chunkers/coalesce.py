"""Coalescing: small neighbouring pieces of one file joined into chunks of useful size.

Chunkers cut by structure, so a file of one-line helpers, short methods and stubs gives
many tiny pieces; alone each says little to a reader or to the embedding model, and each
costs an embedding. Runs of small pieces (under ``min_lines``) are joined until a chunk
reaches ``target_lines``; the joined chunk keeps every defined name, the first named piece's title,
the first docstring, and as symbol the enclosing class or section they share, or else
their names joined.
Pieces with their own text (converted HTML, notebooks) and pieces of other containers
are never joined.
"""

from __future__ import annotations

from .base import Piece

MIN_LINES = 12
TARGET_LINES = 48
MAX_GAP = 2  # blank lines allowed between joined pieces
TINY_LINES = 3  # a piece this small (a label, a stray line) joins what follows, whatever its size


def _container(symbol: str) -> str:
    """What a piece sits in: ``Cls`` for ``Cls.method``, ``ns::Cls`` for ``ns::Cls::f``, the parent heading."""
    for sep in (" > ", "::", "."):
        if sep in symbol:
            return symbol.rsplit(sep, 1)[0]
    return ""


def coalesce(
    pieces: list[Piece], min_lines: int = MIN_LINES, target_lines: int = TARGET_LINES
) -> list[Piece]:
    out: list[Piece] = []
    group: list[Piece] = []

    def flush() -> None:
        if not group:
            return
        if len(group) == 1:
            out.append(group[0])
        else:
            first = group[0]
            containers = {_container(p.symbol) for p in group}
            shared = containers.pop() if len(containers) == 1 else ""
            named = [p for p in group if p.symbol]
            if len(named) == 1:
                symbol = named[0].symbol
            else:
                symbol = shared or ", ".join(p.symbol for p in named)
            defines: list[str] = []
            for p in group:
                defines.extend(n for n in p.defines if n not in defines)
            out.append(
                Piece(
                    start_line=first.start_line,
                    end_line=group[-1].end_line,
                    symbol=symbol,
                    title=named[0].title if named else first.title,
                    doc=next((p.doc for p in group if p.doc), ""),
                    anchor=first.anchor,
                    defines=tuple(defines),
                )
            )
        group.clear()

    for p in pieces:
        size = p.end_line - p.start_line + 1
        small = p.text is None and size < min_lines
        if group:
            span = p.end_line - group[0].start_line + 1
            lone_tiny = (
                len(group) == 1 and group[0].end_line - group[0].start_line + 1 <= TINY_LINES
            )
            joinable = (
                (small or (lone_tiny and p.text is None))
                and p.start_line - group[-1].end_line - 1 <= MAX_GAP
                and span <= target_lines
                and _container(p.symbol) == _container(group[0].symbol)
            )
            if joinable:
                group.append(p)
                continue
            flush()
        if small:
            group.append(p)
        else:
            out.append(p)
    flush()
    return out
