"""Piece: what a chunker cuts a file into, before the corpus adds where it came from.

A chunker is a function ``chunk(text, path, max_lines) -> list[Piece]``. It sees one
file's text and returns structural units (a function, a class, a section under a
heading) with exact 1-based, inclusive line numbers into that text. The indexer turns
each Piece into a stored Chunk by adding corpus, path, commit, language, tags and URL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Chunks stay far below chromadb's per-record limit and the lexical index's comfort zone.
MAX_CHUNK_CHARS = 12_000
DEFAULT_MAX_LINES = 120


@dataclass(frozen=True)
class Piece:
    """One structural unit of a file.

    start_line/end_line: 1-based, inclusive line numbers into the file's text.
    symbol: qualified name of what the piece defines (``Tensor.copy``,
        ``cute::make_tiled_copy``) or the heading breadcrumb for prose
        (``Instruction Set > wgmma > wgmma.mma_async``); empty for glue code.
    title: one line a person recognises: a signature, a heading.
    doc: docstring, leading comment or first paragraph: feeds the dense embedding text.
    anchor: the URL fragment of a documentation section (``#wgmma-mma-async``).
    defines: bare names this piece defines or documents (``make_tiled_copy``,
        ``wgmma.mma_async``); the search boosts exact matches on these.
    text: the chunk's text when it is not the raw lines (HTML converted to text);
        None means "the lines start_line..end_line of the file".
    """

    start_line: int
    end_line: int
    symbol: str = ""
    title: str = ""
    doc: str = ""
    anchor: str = ""
    defines: tuple[str, ...] = field(default_factory=tuple)
    text: str | None = None

    def body(self, lines: list[str]) -> str:
        """The piece's text, given the file split with ``str.splitlines()``."""
        if self.text is not None:
            return self.text
        return "\n".join(lines[self.start_line - 1 : self.end_line])


Chunker = Callable[[str, str, int], list[Piece]]
