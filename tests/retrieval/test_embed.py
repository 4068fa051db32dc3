"""Embedders with the real offline model: the transformer (order, lengths, batching) and
the static model distilled from it by the real model2vec (the "tiny" recipe: the same
code path as the default, a pruned base vocabulary so it builds in seconds)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxkernel.embedders import static as static_embed
from ctxkernel.embedders.embed import StaticEmbedder, TransformerEmbedder, get_embedder
from ctxkernel.errors import UserError


def test_rows_follow_the_input_order_whatever_the_batching() -> None:
    embedder = TransformerEmbedder()
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
    embedder = TransformerEmbedder()
    short, long = embedder.token_lengths(["tl.dot", "word " * 1000])
    assert 2 < short < 10  # [CLS] tl . dot [SEP]
    assert long == embedder.max_tokens


def test_a_module_docstring_piece_is_embedded_as_prose() -> None:
    from ctxkernel.corpus import Chunk
    from ctxkernel.embedders.embed import CODE_CHARS, GLUE_CHARS, embed_text

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


def test_static_is_the_default_and_minilm_the_quality_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXKERNEL_EMBED", raising=False)
    assert get_embedder().kind == "static"
    assert get_embedder("minilm").key == "all-MiniLM-L6-v2@128"
    monkeypatch.setenv("CTXKERNEL_EMBED", "minilm")
    assert get_embedder().kind == "transformer"
    assert get_embedder("static").kind == "static"  # the argument wins over the env


def test_static_vectors_match_model2vec_and_identifiers_are_tokens() -> None:
    """Our light encoder (numpy + tokenizers) gives model2vec's vectors; the vocabulary's
    names are single tokens with rows of their own."""
    from model2vec import StaticModel as M2V

    embedder = StaticEmbedder()
    model = embedder.model()
    texts = [
        "cute::make_tiled_copy(copy_atom, thr_layout, val_layout)",
        "how do I partition a tensor across threads with a tiled copy",
        "acc = tl.dot(a, b, acc)",
        "",
        "shared memory " * 400,  # longer than the token cap
    ]
    ours = embedder.embed(texts)
    theirs = M2V.from_pretrained(str(model.folder)).encode(texts)
    norms = np.linalg.norm(ours, axis=1)
    assert np.allclose(norms[[0, 1, 2, 4]], 1.0, atol=1e-4) and norms[3] == 0.0
    # model2vec's rows are its own (before our identifier rows): the base texts agree
    np.testing.assert_allclose(ours[1], theirs[1], atol=5e-3)
    for name, text in (("make_tiled_copy", texts[0]), ("tl.dot", texts[2])):
        token = model.tokenizer.token_to_id(name)
        assert token is not None
        assert token in model.tokenizer.encode(text, add_special_tokens=False).ids
    assert embedder.dimension == 64  # the tiny recipe's size


def test_identifier_rows_weigh_what_their_pieces_weigh() -> None:
    """Regression: as distilled, every identifier row pointed the same way (and weighed
    one token), so dense search matched any code to any name."""
    embedder = StaticEmbedder()
    model = embedder.model()
    names = ["make_tiled_copy", "cp.async.bulk.tensor", "tl.dot", "local_tile"]
    rows = [
        np.asarray(model.vectors[model.tokenizer.token_to_id(n)], dtype=np.float32) for n in names
    ]
    unit = np.stack([r / np.linalg.norm(r) for r in rows])
    cos = unit @ unit.T
    assert cos[np.triu_indices(len(names), 1)].mean() < 0.6
    # the name's row is as long as the sum of its pieces' rows
    pieces = model.tokenizer.encode("make tiled copy", add_special_tokens=False).ids
    total = np.asarray(model.vectors[pieces], dtype=np.float32).sum(axis=0)
    assert np.linalg.norm(rows[0]) == pytest.approx(np.linalg.norm(total), rel=0.2)


def test_built_model_is_cached_per_recipe_digest(embedders_dir: Path) -> None:
    rec = static_embed.recipe("tiny")
    StaticEmbedder().model()  # built once for the session
    folder = static_embed.model_dir(rec.digest)
    assert folder.parent == embedders_dir
    info = json.loads((folder / "recipe.json").read_text())
    assert info["digest"] == rec.digest and info["vocabulary_size"] == len(rec.vocabulary)
    mtime = (folder / "vectors.npy").stat().st_mtime
    assert static_embed.build(rec) == folder  # cached: nothing is distilled again
    assert (folder / "vectors.npy").stat().st_mtime == mtime
    other = dataclasses.replace(rec, pca_dims=32)
    assert other.digest != rec.digest and not static_embed.is_built(other.digest)


def test_an_unknown_old_recipe_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="re-index the corpus"):
        StaticEmbedder(digest="0123456789ab").model()


def test_static_query_needs_no_torch(embedders_dir: Path) -> None:
    """Embedding with the static model in a fresh process imports neither torch nor
    sentence-transformers nor model2vec."""
    StaticEmbedder().model()
    code = (
        "import sys\n"
        "from ctxkernel.embedders.embed import get_embedder\n"
        "v = get_embedder('static').embed_query('tma load with an mbarrier')\n"
        "assert v.shape == (64,)\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'model2vec', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
