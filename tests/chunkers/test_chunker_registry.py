"""The registry, and properties every chunker keeps on arbitrary input."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from ctxkernel.chunkers import (
    CHUNKER_NAMES,
    cpp,
    get_chunker,
    lines,
    markdown,
    notebook,
    ptx_html,
    python,
)

Check = Callable[..., None]  # the `check` fixture from conftest.py


def test_names_map_to_their_modules() -> None:
    assert CHUNKER_NAMES == ("python", "cpp", "markdown", "rst", "ptx_html", "notebook", "lines")
    assert get_chunker("python") is python.chunk
    assert get_chunker("cpp") is cpp.chunk
    assert get_chunker("markdown") is markdown.chunk
    assert get_chunker("rst") is markdown.chunk_rst
    assert get_chunker("ptx_html") is ptx_html.chunk
    assert get_chunker("lines") is lines.chunk
    assert get_chunker("notebook") is notebook.chunk


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown chunker 'latex'.*python, cpp, markdown"):
        get_chunker("latex")


_FRAGMENTS = [
    "{", "}", ";", "(", ")", '"', "'", "/*", "*/", "//", "\n", "\n\n", "\n#if 0\n",
    "\n#else\n", "\n#endif\n", "\n#define X \\\n", 'R"(', ')"', "namespace a ", "struct S ",
    "template <class T> ", "void f() ", "x", " ", "\t", "\\", "<", ">", "=", ":", "\r\n",
    "\x0c", "\u2028", "def f():\n", "    ", "@d\n", "class C:\n", '"""', "# h\n", "```\n",
    "===\n", "---\n", '<section id="a">', "</section>", "<pre>", "</pre>", "<h1>", "</h1>",
    '<div class="section" id="b">', "</div>", "&lt;", "<td>", "<tr>", "é",
]  # fmt: skip


@pytest.mark.parametrize("name", CHUNKER_NAMES)
def test_arbitrary_input_never_raises_and_keeps_the_invariants(name: str, check: Check) -> None:
    chunk = get_chunker(name)
    rng = random.Random(name)
    for _ in range(60):
        text = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(0, 300)))
        max_lines = rng.choice([1, 2, 3, 7, 120])
        pieces = chunk(text, "fuzz", max_lines)
        assert pieces == chunk(text, "fuzz", max_lines)  # deterministic
        if name == "ptx_html":
            n = len(text.splitlines())
            assert all(1 <= p.start_line <= p.end_line <= max(n, 1) for p in pieces)
        else:
            check(text, pieces)


@pytest.mark.parametrize("name", CHUNKER_NAMES)
def test_empty_and_blank_files_give_no_pieces(name: str) -> None:
    chunk = get_chunker(name)
    assert chunk("", "empty", 120) == []
    assert chunk("\n \n\t\n", "blank", 120) == []
