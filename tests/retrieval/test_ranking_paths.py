"""The ranking paths  on a small corpus the test writes (real git repo, real
chromadb, real MiniLM): a pasted error with runtime values finds the chunk that raises
it, a license-headed file's hits are titled by their content, an example-seeking query
ranks the example first, overlapping chunks of one file are one hit."""

from __future__ import annotations

import json
from collections.abc import Callable

from ctxkernel import Workspace
from ctxkernel.corpus import Chunk, Hit
from ctxkernel.hitlist import merge_adjacent

from .conftest import CliResult, dedent

LICENSE = """\
/***************************************************************************************************
 * Copyright (c) 2017 - 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions are met:
 **************************************************************************************************/
"""

CORPUS = "ranked"
FILES = {
    "src/operands.py": dedent(
        '''
        """Operand checks for tiled MMA."""


        def check_operands(lhs, rhs):
            """Two operands of one tiled MMA must agree on their element type."""
            if lhs.dtype != rhs.dtype:
                raise TypeError(
                    f"Got {lhs.dtype} and {rhs.dtype} for the operands of a tiled mma"
                )
            return lhs.dtype


        def operand_names(mma):
            """The names of the operands of a tiled mma, for messages."""
            return [f"{mma.name}.{p}" for p in ("a", "b", "c")]
        '''
    ),
    "docs/troubleshooting.md": dedent(
        """
        # Troubleshooting tiled MMA

        ## Operand types

        The operands of a tiled mma got different types (fp16 and fp32, say) when the
        inputs were not converted first. Got a mismatch? Convert the operands of the
        tiled mma to one type before the call; fp16 and fp32 operands do not mix.
        """
    ),
    "include/epilogue.hpp": LICENSE
    + dedent(
        """

        #pragma once

        namespace demo {

        /// Tile of the epilogue that stores the accumulators
        template <int Rows>
        struct EpilogueTile {
          int rows = Rows;
          int stride = 0;
        };

        }  // namespace demo
        """
    ),
    "src/examples/grouped_gemm/grouped_gemm.py": dedent(
        '''
        """Grouped GEMM: many small matrix multiplications launched as one kernel."""


        def grouped_gemm(problems):
            """Run every problem of the group in one persistent launch."""
            return [a @ b for a, b in problems]
        '''
    ),
    "docs/gemm_overview.md": dedent(
        """
        # GEMM overview

        A grouped GEMM runs many GEMM problems at once. GEMM kernels come in dense,
        grouped and batched flavours; a grouped GEMM shares one launch across the group
        of GEMM problems, and grouped GEMM scheduling decides which GEMM runs where.
        """
    ),
}


def test_error_with_runtime_values_finds_the_raising_chunk(files_ws: Workspace) -> None:
    query = "TypeError: Got fp16 and fp32 for the operands of a tiled mma"
    hits = files_ws.search(query, k=3).hits
    top = hits[0].chunk
    assert top.path == "src/operands.py", [h.id for h in hits]
    assert "raise TypeError(" in top.text
    # the doc that repeats the words is found too, but below the raise
    assert any(h.chunk.path == "docs/troubleshooting.md" for h in hits[1:])


def test_license_headed_file_is_titled_by_its_content(
    files_ws: Workspace, run_cli: Callable[..., CliResult]
) -> None:
    res = run_cli("search", "EpilogueTile", "--json", "-k", "5")
    hits = [json.loads(line) for line in res.out.splitlines()]
    hits = [h for h in hits if h["type"] == "hit" and h["path"] == "include/epilogue.hpp"]
    assert hits, res.out
    for h in hits:
        assert "Copyright" not in h["title"] and "SPDX" not in h["title"], h["title"]
    assert any("EpilogueTile" in h["title"] for h in hits), [h["title"] for h in hits]
    # the license's words are not searchable text of the chunk
    words = files_ws.search("redistribution binary forms conditions", k=5, mode="lexical").hits
    assert all(h.chunk.path != "include/epilogue.hpp" for h in words), [h.id for h in words]


def test_example_query_ranks_the_example_first(files_ws: Workspace) -> None:
    hits = files_ws.search("where is an example of a grouped GEMM", k=3).hits
    assert hits[0].chunk.path == "src/examples/grouped_gemm/grouped_gemm.py", [h.id for h in hits]
    # the same words without asking for an example: the overview may lead
    plain = files_ws.search("grouped GEMM", k=3).hits
    assert {h.chunk.path for h in plain} >= {"docs/gemm_overview.md"}


def _hit(start: int, end: int, path: str = "a.py", score: float = 1.0) -> Hit:
    text = "\n".join(f"line {n}" for n in range(start, end + 1))
    chunk = Chunk("c", path, start, end, text, url=f"https://x/{path}#L{start}-L{end}")
    return Hit(chunk, score=score)


def test_overlapping_chunks_of_one_file_are_one_hit() -> None:
    merged = merge_adjacent([_hit(10, 20), _hit(15, 30), _hit(40, 50), _hit(10, 20, "b.py")])
    assert [(h.chunk.path, h.chunk.start_line, h.chunk.end_line) for h in merged] == [
        ("a.py", 10, 30),
        ("a.py", 40, 50),
        ("b.py", 10, 20),
    ]
    assert merged[0].chunk.url.endswith("#L10-L30")
    # the lines of both, each once (the overlap is not repeated, the tail not lost)
    assert merged[0].chunk.text.splitlines() == [f"line {n}" for n in range(10, 31)]
    assert merged[0].extra["merged"] == ["c:a.py:15-30"]
