"""Chunkers: one module per file format, each cutting a file into structural Pieces.

``get_chunker(name)`` returns the function for a name used in ``corpora/*.toml``.
"""

from __future__ import annotations

from . import cpp, lines, markdown, notebook, ptx_html, python
from .base import DEFAULT_MAX_LINES, MAX_CHUNK_CHARS, Chunker, Piece
from .markdown import heading_names, slugify

__all__ = [
    "CHUNKER_NAMES",
    "DEFAULT_MAX_LINES",
    "MAX_CHUNK_CHARS",
    "Chunker",
    "Piece",
    "get_chunker",
    "heading_names",
    "slugify",
]

_CHUNKERS: dict[str, Chunker] = {
    "python": python.chunk,
    "cpp": cpp.chunk,
    "markdown": markdown.chunk,
    "rst": markdown.chunk_rst,
    "ptx_html": ptx_html.chunk,
    "notebook": notebook.chunk,
    "lines": lines.chunk,
}
CHUNKER_NAMES = tuple(_CHUNKERS)


def get_chunker(name: str) -> Chunker:
    """The chunker registered under ``name``; ValueError naming the known ones otherwise."""
    try:
        return _CHUNKERS[name]
    except KeyError:
        known = ", ".join(CHUNKER_NAMES)
        raise ValueError(f"unknown chunker {name!r}; known chunkers: {known}") from None
