"""Hub chunks: text that matches everything and answers nothing — a table of contents, a
list of links, an API index, an ``__init__`` that only imports and re-exports.

Such chunks hold a little of every topic's vocabulary, so the lexical and dense rankers
put them in the top five of many unrelated questions. ``listing_share`` tells how much
of a chunk is listing (bullets, table rows, links, toctree entries, imports, bare names),
and the searcher ranks a chunk that is mostly listing a little lower.
"""

from __future__ import annotations

import functools
import re

_LISTING = re.compile(
    r"""^\s*(?:[-*+]\s|\d+[.)]\s|\|"""  # bullets, numbered items, table rows
    r"""|from\s+\S+\s+import\b|import\s+\S"""  # re-exports
    r"""|["'][\w.]+["'],?\s*$"""  # an ``__all__`` entry
    r"""|[\w./-]+\s*$"""  # a bare name: a toctree or autosummary entry
    r"""|\.\.\s+(?:toctree|autosummary|automodule|autoclass)::|:(?:doc|ref):)"""
)
_LINK = re.compile(r"\]\(|<a href=|:doc:`|:ref:`")
MIN_LINES = 8


@functools.lru_cache(maxsize=8192)  # the same hits come back across a server's queries
def listing_share(text: str) -> float:
    """The share of a chunk's non-blank lines that are listing; 0 for short chunks."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < MIN_LINES:
        return 0.0
    listing = sum(1 for line in lines if _LISTING.match(line) or _LINK.search(line))
    return listing / len(lines)
