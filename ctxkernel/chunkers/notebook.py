"""The notebook chunker: Jupyter ``.ipynb`` files cut at markdown headings into pieces
of consecutive cells.

The stored text is what a reader sees — markdown cells as they are, code cells fenced
as Python, outputs dropped — while line numbers point into the notebook's JSON, at the
cells the piece came from. Notebooks that are not pretty-printed JSON with one cell key
per line fall back to line windows.
"""

from __future__ import annotations

import json
import re

from . import lines as lines_chunker
from ._merge import finalize
from .base import DEFAULT_MAX_LINES, MAX_CHUNK_CHARS, Piece
from .markdown import heading_names

_CELL_TYPE = re.compile(r'^\s*"cell_type":\s*"(\w+)"')
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_DEF = re.compile(r"^(?:@\w[\w.]*\s*)*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


def _cell_source(cell: dict[str, object]) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def chunk(text: str, path: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Piece]:
    try:
        cells = json.loads(text).get("cells", [])
    except (json.JSONDecodeError, AttributeError):
        return lines_chunker.chunk(text, path, max_lines)
    raw = text.splitlines()
    starts = [i + 1 for i, line in enumerate(raw) if _CELL_TYPE.match(line)]
    if not cells or len(starts) != len(cells):
        return lines_chunker.chunk(text, path, max_lines)
    # a cell spans from its cell_type line to the line before the next cell's
    spans = [
        (s, (starts[i + 1] - 1 if i + 1 < len(starts) else len(raw))) for i, s in enumerate(starts)
    ]
    pieces: list[Piece] = []
    group: list[int] = []
    crumbs: list[tuple[int, str]] = []

    def flush() -> None:
        if not group:
            return
        parts: list[str] = []
        names: list[str] = []
        title, doc = "", ""
        for idx in group:
            cell = cells[idx]
            source = _cell_source(cell).rstrip()
            if not source:
                continue
            if cell.get("cell_type") == "markdown":
                parts.append(source)
                for line in source.splitlines():
                    m = _HEADING.match(line)
                    if m:
                        names.extend(heading_names(m.group(2)))
                        title = title or m.group(2)
                if not doc:
                    doc = next(
                        (
                            p.strip()
                            for p in source.split("\n\n")
                            if p.strip() and not p.startswith("#")
                        ),
                        "",
                    )
            else:
                parts.append(f"```python\n{source}\n```")
                names.extend(_DEF.findall(source))
                title = title or source.splitlines()[0]
        body = "\n\n".join(parts)
        if body.strip():
            symbol = " > ".join(t for _, t in crumbs)
            pieces.append(
                Piece(
                    start_line=spans[group[0]][0],
                    end_line=spans[group[-1]][1],
                    symbol=symbol,
                    title=title[:200],
                    doc=doc[:400],
                    defines=tuple(dict.fromkeys(names)),
                    text=body[:MAX_CHUNK_CHARS],
                )
            )
        group.clear()

    size = 0
    for idx, cell in enumerate(cells):
        source = _cell_source(cell)
        heading = None
        if cell.get("cell_type") == "markdown":
            for line in source.splitlines():
                m = _HEADING.match(line)
                if m:
                    heading = (len(m.group(1)), m.group(2).strip())
                    break
        n = source.count("\n") + 1
        if group and (heading is not None or size + n > max_lines):
            flush()
            size = 0
        if heading is not None:
            level = heading[0]
            crumbs[:] = [c for c in crumbs if c[0] < level] + [heading]
        group.append(idx)
        size += n
    flush()
    return (
        finalize(pieces, raw, trim_blank=False)
        if pieces
        else lines_chunker.chunk(text, path, max_lines)
    )
