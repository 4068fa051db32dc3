"""Coalescing small neighbouring pieces into chunks of useful size."""

from __future__ import annotations

from ctxkernel.chunkers import get_chunker
from ctxkernel.chunkers.base import Piece
from ctxkernel.chunkers.coalesce import coalesce


def test_small_functions_are_joined_with_all_their_names() -> None:
    helpers = "\n".join(f"def m{i}(x):\n    return x + {i}\n\n" for i in range(10))
    text = helpers + "\ndef big():\n" + "    x = 1\n" * 30
    pieces = get_chunker("python")(text, "t.py", 120)
    joined = coalesce(pieces, min_lines=12, target_lines=48)
    assert len(joined) < len(pieces)
    names = {n for p in joined for n in p.defines}
    assert {f"m{i}" for i in range(10)} <= names and "big" in names
    big = next(p for p in joined if "big" in p.defines)
    assert big.defines == ("big",) and big.symbol == "big"  # large pieces stay alone
    # every line that was covered is still covered, in order, without overlaps
    covered = [ln for p in joined for ln in range(p.start_line, p.end_line + 1)]
    assert covered == sorted(set(covered))
    assert {ln for p in pieces for ln in range(p.start_line, p.end_line + 1)} <= set(covered)


def test_pieces_of_different_containers_and_text_pieces_stay_apart() -> None:
    a = Piece(1, 3, symbol="A.f", defines=("f",))
    b = Piece(4, 6, symbol="B.g", defines=("g",))
    c = Piece(7, 8, symbol="", text="converted text")
    d = Piece(9, 10, symbol="", text="more")
    assert coalesce([a, b, c, d]) == [a, b, c, d]
    e = Piece(11, 13, symbol="A.h", defines=("h",))
    f = Piece(14, 16, symbol="A.i", defines=("i",))
    (joined,) = coalesce([e, f])
    assert (joined.start_line, joined.end_line, joined.symbol, joined.defines) == (
        11,
        16,
        "A",
        ("h", "i"),
    )


def test_a_group_stops_at_the_target_size() -> None:
    pieces = [Piece(1 + 10 * i, 10 + 10 * i, symbol=f"f{i}", defines=(f"f{i}",)) for i in range(10)]
    joined = coalesce(pieces, min_lines=12, target_lines=48)
    assert all(p.end_line - p.start_line + 1 <= 48 for p in joined)
    assert len(joined) == 3


def test_a_class_kept_whole_defines_its_methods() -> None:
    text = "class ThrCopy:\n    '''A thread's slice.'''\n\n    def partition_S(self, t):\n        return t\n\n    def partition_D(self, t):\n        return t\n"
    (piece,) = get_chunker("python")(text, "atom.py", 120)
    assert piece.defines == ("ThrCopy", "partition_S", "partition_D")


def test_a_tiny_piece_joins_the_larger_one_after_it() -> None:
    label = Piece(1, 2, symbol="", title=".. _aot:")
    section = Piece(
        4,
        23,
        symbol="Ahead-of-Time (AOT) Compilation",
        title="Ahead-of-Time (AOT) Compilation",
        defines=(),
    )
    (joined,) = coalesce([label, section])
    assert (joined.start_line, joined.end_line) == (1, 23)
    assert joined.title == "Ahead-of-Time (AOT) Compilation"
