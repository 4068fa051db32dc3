"""The pieces the ranking reads a query and a chunk with: an error message
peeled of its wrapping, a raise site matched with its format fields as wildcards, a
license header told apart from content, folder and file names ranked by the query's
words. Pure functions on text: no index needed."""

from __future__ import annotations

import pytest

from ctxkernel import boilerplate, pathrank, querytext, raises

LICENSED_HPP = """\
/***************************************************************************************************
 * Copyright (c) 2017 - 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions are met:
 **************************************************************************************************/

/*! \\file
    \\brief Tile iterators for the epilogue.
*/
#pragma once
"""

LICENSED_PY = """\
# SPDX-FileCopyrightText: Copyright (c) 2025 - 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: LicenseRef-NvidiaProprietary
#
# Use of this software is governed by the terms and conditions of the
# NVIDIA End User License Agreement (EULA).

import math
"""


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("TypeError: Got fp16 and fp32", "Got fp16 and fp32"),
        (
            "DSLRuntimeError: Error generating c header arguments: 512",
            "Error generating c header arguments: 512",
        ),
        (
            "triton.compiler.errors.CompilationError: at 26:16: "
            "AssertionError('Expected parent to be an instance of AMDMFMALayout')",
            "Expected parent to be an instance of AMDMFMALayout",
        ),
        (
            'kernel.cu(84): error: static assertion failed with "Expected a CopyAtom with the '
            'same type-width as the Tensor."',
            "Expected a CopyAtom with the same type-width as the Tensor.",
        ),
        ("error[INTERNAL]: the pipeline has no stages", "the pipeline has no stages"),
    ],
)
def test_error_message_peels_types_locations_and_quotes(query: str, message: str) -> None:
    assert querytext.error_message(query) == message


@pytest.mark.parametrize(
    "query",
    ["how do I tile a GEMM", "tl.dot", "make_tiled_copy", "why does my kernel error out"],
)
def test_questions_and_names_are_not_error_messages(query: str) -> None:
    assert querytext.error_message(query) is None


def test_example_seeking_queries_are_recognised() -> None:
    assert querytext.wants_example("where is the example for grouped GEMM on Blackwell")
    assert querytext.wants_example("show me sample code for TMA store")
    assert not querytext.wants_example("how does the pipeline count its stages")
    assert not querytext.wants_example("ValueError: example tensor must be 2-D")


RAISING = """\
def check(lhs, rhs):
    if lhs.dtype != rhs.dtype:
        raise TypeError(
            f"Got {lhs.dtype} and "
            f"{rhs.dtype}"
        )
    assert lhs.rank == 2, "expected a rank-%d tensor" % 2
    note = "the dtype words of this line are not raised"
"""


def test_format_fields_match_runtime_values() -> None:
    score, line = raises.match(RAISING, "Got fp16 and fp32")
    assert score == pytest.approx(1.0) and line == 2
    score, line = raises.match(RAISING, "expected a rank-3 tensor")
    assert score > 0.9 and line == 6


def test_a_message_no_site_raises_scores_nothing() -> None:
    assert raises.match(RAISING, "shapes of the operands differ along the reduction axis") == (
        0.0,
        -1,
    )


def test_raising_statement_beats_a_line_that_holds_the_words() -> None:
    raised, _ = raises.match(
        'raise ValueError("tile shape is too large")\n', "tile shape is too large"
    )
    held, _ = raises.match('doc = "tile shape is too large"\n', "tile shape is too large")
    assert raised > held > 0


def test_license_header_is_found_and_dropped() -> None:
    lines = LICENSED_HPP.splitlines()
    assert boilerplate.license_lines(lines) == 8
    assert boilerplate.without_license(LICENSED_HPP).startswith("/*! \\file")
    assert boilerplate.license_lines(LICENSED_PY.splitlines()) == 6
    assert boilerplate.without_license("int x = 1;  // no header\n") == "int x = 1;  // no header\n"


def test_license_title_becomes_the_first_meaningful_line() -> None:
    title = " * Copyright (c) 2017 - 2026 NVIDIA CORPORATION & AFFILIATES. All rights reserved."
    assert boilerplate.clean_title(title, LICENSED_HPP, "include/epilogue.hpp") == "/*! \\file"
    assert boilerplate.clean_title(title, LICENSED_PY, "a/b.py") == "import math"
    header_only = "\n".join(LICENSED_PY.splitlines()[:5])
    assert boilerplate.clean_title(title, header_only, "a/b.py") == "b.py"
    # a real heading about licensing is kept
    assert boilerplate.clean_title("License", "# License\nBSD", "README.md") == "License"


def test_path_words_meet_query_words() -> None:
    words = pathrank.words("examples/python/CuTeDSL/cute/blackwell/kernel/dense_gemm/dense_gemm.py")
    assert {"cutedsl", "blackwell", "dense", "gemm", "densegemm"} <= set(words)
    query = pathrank.words("an example of dense GEMM with CuTe DSL", pairs=True)
    assert {"densegemm", "cutedsl"} <= set(query)


def test_regression_backslash_continued_assert_is_one_statement() -> None:
    text = (
        "assert value.shape == desc.block_shape, \\\n"
        '    f"expected value shape {desc.block_shape}, got {value.shape}"\n'
    )
    score, line = raises.match(text, "expected value shape (256, 128), got (2, 1)")
    assert score == pytest.approx(1.0) and line == 0


def test_first_sentence_of_a_longer_message_still_finds_its_site() -> None:
    text = (
        "raise ValueError(\n"
        '    f"tile {tile} does not divide the problem. Pick a tile that divides M, N and K, "\n'
        '    "or pad the operands first"\n'
        ")\n"
        'log("the problem tile does not fit")\n'
    )
    score, line = raises.match(text, "tile (128, 64) does not divide the problem.")
    assert score > raises.MIN_SHARE and line == 0
