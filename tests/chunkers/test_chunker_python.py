"""The Python chunker: defs and classes by AST with decorators, docstrings and glue."""

from __future__ import annotations

from collections.abc import Callable

from ctxkernel.chunkers import Piece, lines, python

Check = Callable[..., None]  # the `check` fixture from conftest.py

KERNELS = '''\
"""Kernels for the softmax tutorial."""
import triton
import triton.language as tl

BLOCK = 128


# Row-wise softmax: one program per row.
@triton.jit
def softmax_kernel(out_ptr, in_ptr,  # pointers
                   n_cols: tl.constexpr) -> None:
    """Softmax of one row."""
    row = tl.program_id(0)
    x = tl.load(in_ptr + row)
    tl.store(out_ptr + row, x)


class Tiler:
    """Tiles a tensor."""

    tile = 64

    @property
    def size(self) -> int:
        return self.tile


@cute.kernel
async def gemm(a: "Tensor", b: "Tensor"):
    pass


@dsl_user_op
@cute.jit(preprocess=False)
def make_copy(atom, *, loc=None, ip=None):
    """Builds a copy."""
    return atom


if __name__ == "__main__":
    softmax_kernel[(1,)](None, None, 4)
'''


def _spans(pieces: list[Piece]) -> list[tuple[int, int, str]]:
    return [(p.start_line, p.end_line, p.symbol) for p in pieces]


def test_defs_with_decorators_comments_and_docstrings(check: Check) -> None:
    pieces = python.chunk(KERNELS, "softmax.py", 120)
    assert _spans(pieces) == [
        (1, 5, ""),
        (8, 15, "softmax_kernel"),
        (18, 25, "Tiler"),
        (28, 30, "gemm"),
        (33, 37, "make_copy"),
        (40, 41, ""),
    ]
    header, kernel, tiler, gemm, make_copy, main = pieces
    assert header.doc == "Kernels for the softmax tutorial."
    assert kernel.title == "def softmax_kernel(out_ptr, in_ptr, n_cols: tl.constexpr) -> None"
    assert kernel.doc == "Softmax of one row."
    assert kernel.defines == ("softmax_kernel",)
    assert tiler.title == "class Tiler"
    assert tiler.doc == "Tiles a tensor."
    assert tiler.defines == ("Tiler", "size")  # a class kept whole defines its methods too
    assert gemm.title == 'async def gemm(a: "Tensor", b: "Tensor")'
    assert make_copy.title == "def make_copy(atom, *, loc=None, ip=None)"
    assert make_copy.doc == "Builds a copy."
    assert main.title == 'if __name__ == "__main__":'
    lines_of = KERNELS.splitlines()
    assert kernel.body(lines_of).startswith("# Row-wise softmax")
    check(KERNELS, pieces)


NESTED = '''\
class Outer:
    """Outer doc."""
    x = 1

    class Inner:
        def method(self):
            return 1

        def other(self):
            return 2

    def run(self):
        return 3
'''


def test_a_long_class_becomes_a_header_and_its_members(check: Check) -> None:
    pieces = python.chunk(NESTED, "nested.py", 4)
    assert _spans(pieces) == [
        (1, 3, "Outer"),
        (5, 5, "Outer.Inner"),
        (6, 7, "Outer.Inner.method"),
        (9, 10, "Outer.Inner.other"),
        (12, 13, "Outer.run"),
    ]
    assert pieces[0].doc == "Outer doc."
    assert pieces[2].defines == ("method",)
    check(NESTED, pieces)


def test_a_class_within_max_lines_is_one_piece() -> None:
    assert _spans(python.chunk(NESTED, "nested.py", 13)) == [(1, 13, "Outer")]


LONG = """\
def long(x):
    a = 1
    b = 2
    c = 3
    d = 4
    e = 5
    f = 6
    g = 7
    return a
"""


def test_a_long_function_is_split_at_statement_boundaries(check: Check) -> None:
    pieces = python.chunk(LONG, "long.py", 4)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 3), (4, 6), (7, 9)]
    assert {p.symbol for p in pieces} == {"long"}
    assert [p.title for p in pieces] == [
        "def long(x) (part 1/3)",
        "def long(x) (part 2/3)",
        "def long(x) (part 3/3)",
    ]
    check(LONG, pieces)


LOOP = """\
def run(n):
    for i in range(n):
        a = i
        b = i
        c = i
        d = i
        e = i
    return n
"""


def test_a_statement_longer_than_max_lines_is_cut_between_its_inner_statements(
    check: Check,
) -> None:
    pieces = python.chunk(LOOP, "loop.py", 4)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 4), (5, 8)]
    check(LOOP, pieces)


def test_syntax_errors_fall_back_to_line_windows(check: Check) -> None:
    py2 = 'print "hello"\n\ndef f():\n    print "x"\n' + "x = 1\n" * 10
    pieces = python.chunk(py2, "old.py", 5)
    assert pieces == lines.chunk(py2, "old.py", 5)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 5), (6, 10), (11, 14)]
    check(py2, pieces)
    template = "def {{ name }}():\n    return {{ value }}\n"
    assert python.chunk(template, "t.py.j2", 120) == lines.chunk(template, "t.py.j2", 120)


def test_line_numbers_follow_splitlines_with_form_feeds_and_crlf(check: Check) -> None:
    text = 'import os\r\n\x0c\r\ndef f():\r\n    s = "a\u2028b"\r\n    return s\r\n\r\nclass A:\r\n    pass\r\n'
    pieces = python.chunk(text, "ff.py", 120)
    # splitlines() sees \x0c and \u2028 as breaks: f is lines 4-7 and A lines 9-10.
    assert _spans(pieces) == [(1, 1, ""), (4, 7, "f"), (9, 10, "A")]
    check(text, pieces)


def test_comment_runs_between_defs_fold_into_a_neighbour(check: Check) -> None:
    text = "def a():\n    pass\n\n# ----- helpers -----\n\ndef b():\n    pass\n"
    pieces = python.chunk(text, "c.py", 120)
    assert _spans(pieces) == [(1, 2, "a"), (4, 7, "b")]
    check(text, pieces)


def test_empty_and_comment_only_files() -> None:
    assert python.chunk("", "e.py", 120) == []
    assert python.chunk("\n\n", "e.py", 120) == []
    pieces = python.chunk("# just a comment\n# and another\n", "c.py", 120)
    assert _spans(pieces) == [(1, 2, "")]


def test_each_piece_of_a_long_module_docstring_carries_its_part(check: Check) -> None:
    explain = "\n".join(f"Step {i}: partition the tile with a tiled copy." for i in range(30))
    source = f'"""Elementwise add.\n\n{explain}\n"""\n\nimport os\n\n\ndef f():\n    return 1\n'
    pieces = python.chunk(source, "example.py", 12)
    doc_pieces = [p for p in pieces if not p.symbol]
    assert len(doc_pieces) >= 3
    for p in doc_pieces:
        first_text = source.splitlines()[p.start_line - 1].strip().strip('"')
        assert p.doc and p.doc.startswith(first_text), (p.start_line, p.doc[:40])
        assert '"""' not in p.doc
    assert "Step 29" in doc_pieces[-1].doc
    check(source, pieces)
