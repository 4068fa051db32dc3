"""A long question whose setting's words fill the top with teaching material makes room
for the API source it means: on a small corpus the test writes (real git repo, real index
and embedder), a question told around three tutorials ("following the softmax tutorial
and the layer norm tutorial ... an assertion fails saying it is not a power of two. which
check is that?") finds the function that asserts it among its first four hits, where
without the setting (``TEACH_DECAY`` 1.0) four tutorial sections lead. Past the first
``TEACH_DECAY_FREE`` teaching chunks each further one counts ``TEACH_DECAY`` less; a short
query and a question after a whole file keep the order they had."""

from __future__ import annotations

import pytest

from ctxkernel import Workspace
from ctxkernel import search as search_module
from ctxkernel.corpus import Chunk, Hit
from ctxkernel.querytext import seeks_file
from ctxkernel.search import thin_teaching

from .conftest import dedent

CORPUS = "pile"
FILES = {
    "docs/softmax_tutorial.md": dedent(
        """
        # Fused softmax tutorial

        The softmax tutorial writes a fused softmax kernel: each program loads one row,
        and the block size is the row length rounded up to a power of two.

        ## The block size

        The tutorial picks the block size from the number of columns; a row longer than
        the block size would need a loop, so the block covers the whole row.

        ## The reduction

        The kernel's reduction takes the row maximum and the sum of the exponentials
        over the block, masked where the block runs past the row.

        ## Benchmark

        The tutorial benchmarks the fused softmax kernel against the framework's own
        softmax over growing row lengths.
        """
    ),
    "docs/layer_norm_tutorial.md": dedent(
        """
        # Layer norm tutorial

        The layer norm tutorial writes a kernel whose reduction computes the mean and
        the variance of each row with a block size chosen from the row length.

        ## Block size and warps

        The tutorial sets the block size to the next power of two of the row length and
        the number of warps from the block size.

        ## Backward pass

        The backward kernel of the layer norm tutorial accumulates the weight gradients
        of many rows in a reduction over a buffer.
        """
    ),
    "docs/reduction_tutorial.md": dedent(
        """
        # Reduction tutorial

        The reduction tutorial sums each row of a matrix in one kernel: the block size
        is the row length rounded up, and the columns past the row are masked.

        ## Choosing the block size

        A reduction kernel whose block size follows the number of columns recompiles
        for each new row length; the tutorial rounds the columns up to a power of two.
        """
    ),
    "src/utils.py": dedent(
        '''
        """Launch helpers."""


        def cdiv(a, b):
            """Ceiling division: the number of blocks of b that cover a."""
            return (a + b - 1) // b


        def validate_tile_dims(dims):
            """Each tile dimension must be a power of two no larger than the element
            limit; an assertion fails otherwise."""
            for dim in dims:
                assert dim & (dim - 1) == 0, f"tile dimension {dim} is not a power of 2"
                assert dim <= 1048576, f"tile dimension {dim} is too large"
            return dims
        '''
    ),
}

LONG_QUESTION = (
    "I am following the softmax tutorial and the layer norm tutorial; my reduction kernel "
    "picks its block size from the row length, and with 257 columns an assertion fails "
    "saying it is not a power of two. which check is that?"
)
SHORT_QUERY = "which check asserts the block size is a power of two"
SEEKS_FILE = (
    "is there an example of a reduction kernel like the softmax tutorial and the layer norm "
    "tutorial, one that picks its block size from the row length and masks the columns?"
)
SOURCE = "src/utils.py"


def ranking(ws: Workspace, query: str, k: int = 10) -> list[str]:
    return [h.id for h in ws.search(query, k=k).hits]


def rank_of_source(ws: Workspace, query: str) -> int:
    ranks = [h.rank for h in ws.search(query, k=10).hits if h.chunk.path == SOURCE]
    return ranks[0] if ranks else 0


def test_a_long_question_finds_the_source_past_a_pile_of_tutorials(
    files_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(LONG_QUESTION.split()) >= search_module.TEACH_DECAY_MIN_WORDS
    assert not seeks_file(LONG_QUESTION)
    on = rank_of_source(files_ws, LONG_QUESTION)
    monkeypatch.setattr(search_module, "TEACH_DECAY", 1.0)
    off = rank_of_source(files_ws, LONG_QUESTION)
    assert 0 < on <= 4 < off, (on, off)


@pytest.mark.parametrize("query", [SHORT_QUERY, SEEKS_FILE])
def test_a_short_query_and_a_question_after_a_file_keep_their_order(
    files_ws: Workspace, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    assert len(query.split()) < search_module.TEACH_DECAY_MIN_WORDS or seeks_file(query)
    on = ranking(files_ws, query)
    monkeypatch.setattr(search_module, "TEACH_DECAY", 1.0)
    assert ranking(files_ws, query) == on


def hit(kind: str, score: float, n: int) -> Hit:
    return Hit(Chunk("c", f"f{n}.md", 1, 2, "text", kind=kind), score=score)


def test_teaching_chunks_past_the_first_few_count_less_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(search_module, "TEACH_DECAY", 0.8)
    monkeypatch.setattr(search_module, "TEACH_DECAY_FREE", 3)
    kinds = ["doc", "tutorial", "example", "doc", "source", "test", "doc"]
    scores = [1.0, 0.95, 0.9, 0.85, 0.8, 0.7, 0.75]
    hits = thin_teaching([hit(k, s, n) for n, (k, s) in enumerate(zip(kinds, scores, strict=True))])
    # the fourth teaching chunk counts 0.8 less (0.68), the fifth 0.64 less (0.48); the
    # source and the test chunk are not teaching material and keep their scores
    assert [h.chunk.path for h in hits] == [
        "f0.md",
        "f1.md",
        "f2.md",
        "f4.md",
        "f5.md",
        "f3.md",
        "f6.md",
    ]
    assert [round(h.score, 3) for h in hits] == [1.0, 0.95, 0.9, 0.8, 0.7, 0.68, 0.48]
