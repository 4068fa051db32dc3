"""Notebook chunker: cells grouped at markdown headings, line numbers into the JSON."""

from __future__ import annotations

import json

from ctxkernel.chunkers import get_chunker


def _notebook(cells: list[tuple[str, str]]) -> str:
    doc = {
        "cells": [
            {
                "cell_type": kind,
                "metadata": {},
                "source": source.splitlines(keepends=True),
                **({"outputs": [], "execution_count": None} if kind == "code" else {}),
            }
            for kind, source in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(doc, indent=1)


def test_cells_grouped_by_heading_with_json_line_numbers() -> None:
    text = _notebook(
        [
            ("code", "import cutlass\nimport cutlass.cute as cute"),
            ("markdown", "## Tensor\n\nA tensor is an engine composed with a layout."),
            ("code", "@cute.jit\ndef make_ones(x):\n    x.fill(1)"),
            ("markdown", "## Printing\n\nUse cute.print_tensor."),
            ("code", "cute.print_tensor(t)"),
        ]
    )
    raw = text.splitlines()
    pieces = get_chunker("notebook")(text, "nb.ipynb", 120)
    assert [p.title for p in pieces] == ["import cutlass", "Tensor", "Printing"]
    tensor = pieces[1]
    assert tensor.symbol == "Tensor"
    assert tensor.defines == ("make_ones",)
    assert tensor.text is not None and "```python\n@cute.jit\ndef make_ones(x):" in tensor.text
    assert tensor.doc == "A tensor is an engine composed with a layout."
    # line numbers point at the cells' JSON: the piece starts at its first cell's cell_type line
    assert '"cell_type": "markdown"' in raw[tensor.start_line - 1]
    assert '"cell_type": "markdown"' in raw[pieces[2].start_line - 1]
    assert tensor.end_line == pieces[2].start_line - 1
    assert pieces[-1].end_line == len(raw)


def test_not_a_notebook_falls_back_to_lines() -> None:
    pieces = get_chunker("notebook")("not json\nat all\n", "x.ipynb", 120)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 2)]
