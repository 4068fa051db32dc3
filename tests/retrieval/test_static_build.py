"""Building the static embedder (``static_distill``): the rows are model2vec's own
``distill``'s (recipe version 2) or ``distill_from_model``'s with the base tokenizer's
padding off (version 3), the transformer pass is model2vec's pooling on batches of one
length, and a model dir only ever appears complete (two builds at once, a killed build).
A smaller cut of the tiny recipe (about 600 base tokens) keeps each build to seconds; the
real bundled MiniLM and model2vec throughout."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ctxkernel.embedders import static as static_embed
from ctxkernel.embedders.distill import contextual_rows, shipped_rows, token_ids

SMALL_REMOVE = static_embed._TINY_REMOVE + r"|[a-z]{3}$|##[a-z]{2}$"
BUILDER = (
    "import dataclasses, sys\n"
    "from ctxkernel.embedders import static as static_embed\n"
    "rec = dataclasses.replace(static_embed.recipe('tiny'), token_remove_pattern=sys.argv[1])\n"
    "static_embed.build(rec, log=lambda m: print(m, flush=True))\n"
)


def small_recipe(version: int = static_embed.RECIPE_VERSION) -> static_embed.Recipe:
    rec = static_embed.recipe("tiny")
    return dataclasses.replace(rec, token_remove_pattern=SMALL_REMOVE, version=version)


def _base() -> tuple[object, object, object]:
    """(transformer, fast tokenizer, skeletoken model of it) of the bundled MiniLM."""
    from skeletoken import TokenizerModel
    from transformers import AutoModel, AutoTokenizer

    _, folder = static_embed.base_model()
    tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    original = TokenizerModel.from_transformers_tokenizer(tokenizer).prune_added_tokens()  # type: ignore[arg-type]
    return AutoModel.from_pretrained(str(folder)), tokenizer, original


def _builder(embedders: Path) -> subprocess.Popen[str]:
    env = os.environ | {"CTXKERNEL_EMBEDDERS_DIR": str(embedders)}
    return subprocess.Popen(
        [sys.executable, "-c", BUILDER, SMALL_REMOVE],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def small_build(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A build killed early, then two builds at once of the same recipe, in a fresh
    embedders dir; what each left behind."""
    embedders = tmp_path_factory.mktemp("embedders")
    rec = small_recipe()
    target = embedders / f"static-{rec.digest}"
    killed = _builder(embedders)
    deadline = time.monotonic() + 120
    while not list(embedders.glob(f"{target.name}.tmp-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    after_kill = {
        "target_exists": target.exists(),
        "leftovers": [p.name for p in embedders.glob(f"{target.name}.tmp-*")],
    }
    both = [_builder(embedders), _builder(embedders)]
    outputs = [p.communicate(timeout=300) for p in both]
    return {
        "embedders": embedders,
        "target": target,
        "after_kill": after_kill,
        "returncodes": [p.returncode for p in both],
        "logs": [out for out, _err in outputs],
        "errors": [err for _out, err in outputs],
    }


def test_a_killed_build_leaves_no_model_and_the_next_build_cleans_up(
    small_build: dict[str, object],
) -> None:
    after_kill = small_build["after_kill"]
    assert isinstance(after_kill, dict)
    assert after_kill["leftovers"] and not after_kill["target_exists"]
    target = small_build["target"]
    assert isinstance(target, Path)
    assert (target / "vectors.npy").is_file() and (target / "tokenizer.json").is_file()
    assert not list(target.parent.glob(f"{target.name}.tmp-*"))  # the killed build's dir


def test_two_builds_at_once_distil_once(small_build: dict[str, object]) -> None:
    assert small_build["returncodes"] == [0, 0], small_build["errors"]
    logs = small_build["logs"]
    assert isinstance(logs, list)
    assert sum("building the static embedder" in log for log in logs) == 1


@pytest.mark.parametrize("version", [2, 3])
def test_build_gives_model2vecs_rows(
    version: int,
    small_build: dict[str, object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast build's rows (before our identifier rows) are model2vec's own distill's
    (version 2), or distill_from_model's given the base tokenizer with its fixed padding
    off (version 3), within float16 rounding."""
    from model2vec import StaticModel as M2V
    from model2vec.distill import distill_from_model

    rec = small_recipe(version)
    if version == static_embed.RECIPE_VERSION:
        target = small_build["target"]
    else:
        monkeypatch.setenv("CTXKERNEL_EMBEDDERS_DIR", str(tmp_path))
        target = static_embed.build(rec)
    assert isinstance(target, Path)
    ours = np.asarray(M2V.from_pretrained(str(target)).embedding, dtype=np.float32)
    model, tokenizer, _ = _base()
    if version >= static_embed.UNPADDED_VERSION:
        tokenizer.backend_tokenizer.no_padding()  # type: ignore[attr-defined]
    logging.getLogger("model2vec").setLevel(logging.ERROR)
    theirs = distill_from_model(
        model,  # type: ignore[arg-type]
        tokenizer,  # type: ignore[arg-type]
        vocabulary=list(rec.vocabulary),
        device="cpu",
        pca_dims=rec.pca_dims,
        sif_coefficient=rec.sif_coefficient,
        token_remove_pattern=rec.token_remove_pattern,
    )
    ref = np.asarray(theirs.embedding, dtype=np.float32)
    assert ours.shape == ref.shape and ours.shape[1] == rec.pca_dims
    # float16 rows: one unit in the last place of the largest ones at most
    np.testing.assert_allclose(ours, ref, rtol=0, atol=np.abs(ref).max() * 2**-10)
    info = json.loads((target / "recipe.json").read_text())
    assert info["digest"] == rec.digest and info["version"] == version
    # ~3 tokens a base token, 128 a padded identifier (computed, or shipped: the rows of
    # the default recipe's identifiers come with the package, and the tiny vocabulary's
    # are among them, so these rows check the shipped ones against model2vec's)
    tokens = info["tokens_embedded"] + info["tokens_shipped"]
    padded = tokens > 4 * len(ours)
    assert padded == (version < static_embed.UNPADDED_VERSION)


def test_identifiers_were_embedded_with_120_pad_tokens() -> None:
    """Regression (recipe version 2, the 10-minute build): model2vec encodes each
    multi-piece entry with MiniLM's tokenizer as saved, padded to 128, and averages the
    pads in: 91 % of the default build's tokens are [PAD]. Version 3's ids are model2vec's
    with the padding cut off; version 2's are model2vec's."""
    from model2vec.tokenizer import turn_tokens_into_ids

    _, _, original = _base()
    entries = ["make_tiled_copy", "tl.dot", "cp.async.bulk.tensor", "tensor", "copy"]
    theirs = turn_tokens_into_ids(entries, original)  # type: ignore[arg-type]
    ours = token_ids(entries, original)
    assert token_ids(entries, original, padded=True) == theirs
    pad = original.pad_token_id  # type: ignore[attr-defined]
    assert len(theirs[0]) == 128 and theirs[0].count(pad) > 100  # what broke
    for mine, model2vecs in zip(ours, theirs, strict=True):
        assert pad not in mine
        assert mine == [t for t in model2vecs if t != pad]
    assert ours[3] == [101, original.vocabulary["tensor"], 102]  # type: ignore[attr-defined]


def test_batches_of_one_length_pool_as_model2vec_does() -> None:
    """Sequences grouped by length (no padding, no mask) give model2vec's padded and
    masked mean pooling, in the input order."""
    from model2vec.distill.inference import create_embeddings

    model, _, original = _base()
    ids = token_ids(
        ["make_tiled_copy", "tl.dot", "shared", "x", "cp.async.bulk.tensor", "the", "mbarrier"],
        original,
    )
    ours = contextual_rows(model, ids)
    theirs = create_embeddings(model, ids, device="cpu", pad_token_id=0)  # type: ignore[arg-type]
    assert ours.shape == theirs.shape == (len(ids), 384)
    np.testing.assert_allclose(ours, theirs, atol=2e-5)


def test_shipped_rows_are_the_transformers_own() -> None:
    """The rows that ship for the default recipe's padded identifiers are what the bundled
    MiniLM computes for those sequences (float16 rounding), and are found by sequence:
    another sequence (the same names unpadded, version 3) gets none of them."""
    from skeletoken.external.transformers import reshape_embeddings

    rec = static_embed.recipe("default")
    model, _, original = _base()
    model = reshape_embeddings(model, original)  # as the build does: rows in original's ids
    names = ["make_tiled_copy", "local_tile", "wgmma.mma_async"]  # in the shipped vocabulary
    ids = token_ids(names, original, padded=True)
    shipped = shipped_rows(rec.base_fingerprint, ids)
    assert sorted(shipped) == [0, 1, 2]
    fresh = contextual_rows(model, ids)
    for i in range(len(names)):
        np.testing.assert_allclose(
            shipped[i], fresh[i], rtol=0, atol=np.abs(fresh[i]).max() * 2**-10
        )
    assert shipped_rows(rec.base_fingerprint, token_ids(names, original)) == {}
    assert shipped_rows("another-copy", ids) == {}


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_shipped_file_means_computing_not_failing(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shipped-rows file cut short or overwritten (a broken install) gives no rows, so
    the build computes them all: slower, never wrong, never a traceback."""
    from ctxkernel.embedders import distill as static_distill

    bad = tmp_path / "rows.npz"
    shipped = static_distill.SHIPPED_ROWS.read_bytes()
    bad.write_bytes(b"not a zip file" if damage == "garbage" else shipped[: len(shipped) // 2])
    monkeypatch.setattr(static_distill, "SHIPPED_ROWS", bad)
    _, _, original = _base()
    ids = token_ids(["make_tiled_copy"], original, padded=True)
    rec = static_embed.recipe("default")
    assert shipped_rows(rec.base_fingerprint, ids) == {}
