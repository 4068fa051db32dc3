"""The prose chunkers: Markdown and reStructuredText sections, anchors and defines."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ctxkernel.chunkers import Piece, heading_names, markdown, slugify

Check = Callable[..., None]  # the `check` fixture from conftest.py


def _spans(pieces: list[Piece]) -> list[tuple[int, int, str]]:
    return [(p.start_line, p.end_line, p.symbol) for p in pieces]


GUIDE = """\
Intro before headings.

# Guide

## Install
Run the installer.
Then verify it.

```bash
# this is a comment, not a heading
pip install x
```

## `make_tiled_copy`
Builds a TiledCopy from an atom.
It tiles threads.

Setext Heading
--------------
Text under setext.
More text.

~~~
## not a heading either
~~~

### 9.7.15.5.2. Asynchronous Multiply-and-Accumulate Instruction: wgmma.mma_async
The wgmma.mma_async instruction.
Second line.
"""


def test_sections_breadcrumbs_anchors_and_fences(check: Check) -> None:
    pieces = markdown.chunk(GUIDE, "guide.md", 120)
    wgmma = (
        "Guide > Setext Heading > 9.7.15.5.2. Asynchronous Multiply-and-Accumulate "
        "Instruction: wgmma.mma_async"
    )
    assert _spans(pieces) == [
        (1, 1, ""),
        (3, 12, "Guide"),  # "# Guide" alone is merged with its first child
        (14, 16, "Guide > make_tiled_copy"),
        (18, 25, "Guide > Setext Heading"),
        (27, 29, wgmma),
    ]
    intro, guide, tiled, setext, instr = pieces
    assert intro.title == "Intro before headings." and intro.anchor == ""
    assert (guide.title, guide.anchor) == ("Guide", "#guide")
    assert guide.doc == "Run the installer. Then verify it."
    assert (tiled.title, tiled.anchor, tiled.defines) == (
        "make_tiled_copy",
        "#make_tiled_copy",
        ("make_tiled_copy",),
    )
    assert tiled.doc == "Builds a TiledCopy from an atom. It tiles threads."
    assert (setext.title, setext.anchor) == ("Setext Heading", "#setext-heading")
    assert instr.title.endswith("Instruction: wgmma.mma_async")
    assert instr.anchor == "#971552-asynchronous-multiply-and-accumulate-instruction-wgmmamma_async"
    assert instr.defines == ("wgmma.mma_async",)
    check(GUIDE, pieces)


BIG = """\
# Big
para one line a
para one line b

```
code 1
code 2
code 3
```

para two
"""


def test_long_sections_split_at_paragraphs_and_fences_not_inside(check: Check) -> None:
    pieces = markdown.chunk(BIG, "big.md", 5)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 3), (5, 9), (11, 11)]
    assert [p.title for p in pieces] == ["Big (part 1/3)", "Big (part 2/3)", "Big (part 3/3)"]
    assert {p.anchor for p in pieces} == {"#big"}
    check(BIG, pieces)


def test_a_fence_longer_than_max_lines_is_cut_into_windows(check: Check) -> None:
    text = "# Code\n```\n" + "x = 1\n" * 10 + "```\n"
    pieces = markdown.chunk(text, "code.md", 5)
    assert all(p.end_line - p.start_line < 5 for p in pieces)
    check(text, pieces)


def test_duplicate_headings_get_github_suffixes_and_small_siblings_merge() -> None:
    text = "# Usage\none\n\n# Usage\ntwo\nthree\n\n# Usage\nfour\nfive\n"
    pieces = markdown.chunk(text, "u.md", 120)
    assert [(p.start_line, p.end_line, p.anchor) for p in pieces] == [
        (1, 6, "#usage"),  # one content line: merged with the next sibling
        (8, 10, "#usage-2"),
    ]


def test_front_matter_is_not_a_setext_heading() -> None:
    text = "---\ntitle: Doc\nkey: value\n---\n\n# Real\nbody line\nmore\n"
    pieces = markdown.chunk(text, "fm.md", 120)
    assert _spans(pieces) == [(1, 4, ""), (6, 8, "Real")]


def test_empty_markdown() -> None:
    assert markdown.chunk("", "e.md", 120) == []
    assert markdown.chunk("\n  \n", "e.md", 120) == []


RST = """\
.. currentmodule:: triton.language

===============
triton.language
===============

Intro paragraph
spanning two lines.

.. _programming-model:

Programming Model
-----------------

.. autosummary::
    :toctree: generated
    :nosignatures:

    program_id
    num_programs

Linear Algebra Ops
------------------

dot
~~~

.. autofunction:: triton.language.dot

.. code-block:: python

    Title inside code
    =================

Memory Ops
----------
Loads and stores.

More.
"""


def test_rst_titles_levels_labels_and_directives(check: Check) -> None:
    pieces = markdown.chunk_rst(RST, "triton.language.rst", 120)
    assert _spans(pieces) == [
        (1, 1, ""),
        (3, 8, "triton.language"),
        (10, 20, "triton.language > Programming Model"),  # the label belongs to it
        (22, 33, "triton.language > Linear Algebra Ops"),  # merged with its child "dot"
        (35, 39, "triton.language > Memory Ops"),
    ]
    _, top, model, linalg, memory = pieces
    assert (top.title, top.anchor, top.defines) == (
        "triton.language",
        "#triton-language",
        ("triton.language",),
    )
    assert top.doc == "Intro paragraph spanning two lines."
    assert model.anchor == "#programming-model"
    assert model.defines == ("program_id", "num_programs")
    assert linalg.defines == ("triton.language.dot", "dot")
    assert memory.doc == "Loads and stores."
    check(RST, pieces)


def test_rst_long_section_split_keeps_directive_blocks_together(check: Check) -> None:
    text = "Title\n=====\n\npara\n\n.. code-block:: python\n\n    a = 1\n\n    b = 2\n\nafter\n"
    pieces = markdown.chunk_rst(text, "t.rst", 5)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 4), (6, 10), (12, 12)]
    check(text, pieces)


@pytest.mark.parametrize(
    ("heading", "names"),
    [
        (
            "9.7.15.5.2. Asynchronous Multiply-and-Accumulate Instruction: wgmma.mma_async",
            ("wgmma.mma_async",),
        ),
        (
            "Parallel Synchronization and Communication Instructions: "
            "mbarrier.test_wait/mbarrier.try_wait",
            ("mbarrier.test_wait", "mbarrier.try_wait"),
        ),
        ("11.4.2. Performance-Tuning Directives: .reqntid", (".reqntid",)),
        ("cp.async.bulk.tensor", ("cp.async.bulk.tensor",)),
        ("Integer Arithmetic Instructions: add", ("add",)),
        ("Special Registers: %laneid", ("%laneid",)),
        ("Instructions: bar, barrier", ("bar", "barrier")),
        ("`tl.dot(a, b)` and `Copy_Atom<T>`", ("tl.dot", "Copy_Atom")),
        ("TiledMMA", ("TiledMMA",)),
        ("Introduction", ()),
        ("1. Introduction", ()),
        ("Step 1: Install", ()),
        ("Notes: see the table below", ()),
    ],
)
def test_heading_names(heading: str, names: tuple[str, ...]) -> None:
    assert heading_names(heading) == names


def test_slugify_matches_github() -> None:
    assert slugify("Setext Heading") == "setext-heading"
    assert slugify("`wgmma.mma_async` and [links](http://x)") == "wgmmamma_async-and-links"
    assert slugify("C++ & CUDA: a_b-c") == "c--cuda-a_b-c"
