"""The embedder with the real offline model: order, lengths, batching."""

from __future__ import annotations

import numpy as np

from ctxkernel.embed import Embedder


def test_rows_follow_the_input_order_whatever_the_batching() -> None:
    embedder = Embedder()
    texts = [
        "a much longer text about shared memory swizzles, bank conflicts and ldmatrix " * 3,
        "tl.dot",
        "make_tiled_copy partitions a tensor across threads",
        "x",
        "TMA load into shared memory with an mbarrier",
    ]
    together = embedder.embed(texts, batch_size=2)  # sorted by token count inside
    one_by_one = np.stack([embedder.embed([t])[0] for t in texts])
    assert together.shape == (5, embedder.dimension)
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_token_lengths_are_capped_at_the_model_window() -> None:
    embedder = Embedder()
    short, long = embedder.token_lengths(["tl.dot", "word " * 1000])
    assert 2 < short < 10  # [CLS] tl . dot [SEP]
    assert long == embedder.max_tokens


def test_a_module_docstring_piece_is_embedded_as_prose() -> None:
    from ctxkernel.corpus import Chunk
    from ctxkernel.embed import CODE_CHARS, GLUE_CHARS, embed_text

    prose = " ".join(
        f"partition the tile across threads with a tiled copy, step {i}." for i in range(20)
    )
    doc_piece = Chunk("c", "ex/add.py", 71, 129, prose, doc=prose, language="python")
    glue_piece = Chunk(
        "c",
        "ex/add.py",
        384,
        409,
        "if __name__ == '__main__':\n" + "    main()\n" * 40,
        language="python",
    )
    assert len(embed_text(doc_piece)) > CODE_CHARS + 100
    assert len(embed_text(glue_piece)) <= GLUE_CHARS + 200
