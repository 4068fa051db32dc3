"""Invariants every chunker keeps, as a fixture the per-format tests call."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxkernel.chunkers import MAX_CHUNK_CHARS, Piece


def check_pieces(text: str, pieces: list[Piece], *, covers: bool = True) -> None:
    """Sorted, disjoint, in range, non-blank, within MAX_CHUNK_CHARS; optionally covering.

    ``covers``: every non-blank line of ``text`` lies in some piece (not asked of
    chunkers that convert their input, such as HTML).
    """
    lines = text.splitlines()
    previous_end = 0
    covered: set[int] = set()
    for p in pieces:
        assert 1 <= p.start_line <= p.end_line <= len(lines), p
        assert p.start_line > previous_end, f"overlapping or unsorted: {p}"
        previous_end = p.end_line
        body = p.body(lines)
        assert body.strip(), f"blank piece: {p}"
        assert len(body) <= MAX_CHUNK_CHARS, p
        covered.update(range(p.start_line, p.end_line + 1))
    if covers:
        missing = [n for n, line in enumerate(lines, 1) if line.strip() and n not in covered]
        assert not missing, f"non-blank lines in no piece: {missing[:10]}"


@pytest.fixture
def check() -> Callable[..., None]:
    return check_pieces
