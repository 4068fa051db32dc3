"""A file asked for as a whole stands in by its opening: on a small corpus the test writes
(real git repo, real index and embedder), a question after an example to start from that
names no code finds the example page by its opening section, what the page is, though a
later section shares a few more of its words. The section that matches best stands in
otherwise, as ``test_file_stand_in`` pins for questions about a point: with the setting
off, for a question naming a piece of code, and for one that describes that section (its
words match it at least ``FILE_OPENING`` times better than the opening)."""

from __future__ import annotations

import pytest

from ctxkernel import Workspace, querytext
from ctxkernel import search as search_module
from ctxkernel.querytext import names_code, seeks_file

from .conftest import dedent

CORPUS = "opening"
FILES = {
    "src/examples/flash_decoding.md": dedent(
        """
        # Flash decoding

        Flash decoding computes the attention of one new token over a long KV cache in
        num_splits parallel pieces that are combined at the end.

        ## Splitting the KV cache into blocks

        The KV cache is cut into num_splits blocks along the sequence: each block of the
        cache computes the token's attention over its keys and values.

        ## Combining the partial results

        The partial outputs are combined with their log-sum-exp, so the result is the
        one a single pass would give.
        """
    ),
    "docs/attention.md": dedent(
        """
        # Attention

        Attention weighs the values by the softmax of the queries' dot products with
        the keys; causal attention masks the keys after each query.
        """
    ),
    "src/launch.py": dedent(
        '''
        """Kernel launch helpers."""


        def launch(kernel, grid, *args):
            """Launch a compiled kernel over the grid with the arguments."""
            return kernel[grid](*args)
        '''
    ),
}

ASKS_FOR_FILE = "is there an example of decoding with the KV cache in blocks?"
NAMES_CODE = "is there an example of decoding with the KV cache in num_splits blocks?"
DESCRIBES_PART = (
    "is there an example of the KV cache in blocks of the sequence, each block of the cache "
    "on its keys and values?"
)
OPENING = "Flash decoding"
SECTION = "Splitting the KV cache into blocks"


def first_of_page(ws: Workspace, query: str) -> str:
    hits = ws.search(query, k=5).hits
    page = [h.chunk for h in hits if h.chunk.path == "src/examples/flash_decoding.md"]
    assert page, [h.id for h in hits]
    return page[0].title


def test_a_question_after_an_example_finds_the_page_by_its_opening(files_ws: Workspace) -> None:
    assert seeks_file(ASKS_FOR_FILE) and not names_code(ASKS_FOR_FILE)
    assert first_of_page(files_ws, ASKS_FOR_FILE) == OPENING


def test_without_the_setting_the_best_matching_section_stands_in(
    files_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_module, "FILE_OPENING", 0.0)
    assert first_of_page(files_ws, ASKS_FOR_FILE) == SECTION


def test_a_question_naming_code_finds_the_section_that_uses_it(
    files_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert names_code(NAMES_CODE)
    assert first_of_page(files_ws, NAMES_CODE) == SECTION
    # read as a question naming no code, the opening would lead
    monkeypatch.setattr(querytext, "names_code", lambda query: False)
    assert first_of_page(files_ws, NAMES_CODE) == OPENING


def test_a_question_describing_a_later_section_finds_that_section(
    files_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert seeks_file(DESCRIBES_PART) and not names_code(DESCRIBES_PART)
    assert first_of_page(files_ws, DESCRIBES_PART) == SECTION
    # with no bound on how much better the section matches, the opening would lead
    monkeypatch.setattr(search_module, "FILE_OPENING", 100.0)
    assert first_of_page(files_ws, DESCRIBES_PART) == OPENING


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("looking for a sparse MLA forward kernel (DeepSeek V3.2 style) in tilelang", False),
        ("is there an example of fused attention in Triton", False),
        ("an example that calls make_tiled_copy", True),
        ("sample code for cute.compile with options", True),
        ("which kernels set .reqntid", True),
        ("an example using cute::gemm", True),
    ],
)
def test_names_code_counts_names_spelt_as_code_only(query: str, code: bool) -> None:
    assert names_code(query) is code
