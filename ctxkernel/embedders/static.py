"""Static embeddings: a Model2Vec model distilled offline from the bundled all-MiniLM-L6-v2,
with a vocabulary that gives kernel identifiers (``make_tiled_copy``, ``tl.dot``,
``cp.async.bulk.tensor``, ``wgmma``) vectors of their own.

Distilling runs the transformer once over every token of its vocabulary plus the
identifier list (``data/static_vocab.txt``), reduces the outputs with PCA and weights them
(model2vec's recipe, run by ``static_distill``); embedding a text is then a tokenizer call
and a mean of rows, with no transformer, no torch and nothing fetched.

The identifier rows are then reshaped (``static_distill.identifier_rows``). As model2vec
leaves them, they share one strong direction (mean cosine 0.87 between two of them, 0.01
between two base tokens; 0.20 in recipe version 3, whose identifiers skip the ~120 padding
tokens model2vec averages in), and an identifier weighs one token in a text's mean where
its pieces weighed five; dense recall fell from 0.71 to 0.29 on the dev queries. Each identifier row
now points between its own vector (that shared direction taken out) and the sum of its
pieces' rows, with the length of that sum. A *recipe* (base model, vocabulary, sizes)
names a model by its digest; built models are cached per digest under the embedders dir
(``config.embedders_dir()``), so a store that records the digest can always find the model
that embedded it, and a changed recipe never mixes with vectors of the old one.

Only ``build`` needs torch, transformers and model2vec; loading and encoding need numpy and
``tokenizers``, which keeps a fresh process's search fast.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import envvars

from ..errors import UserError
from ..progress import Progress
from .recipe import (  # the recipe, imported where the build reads it
    _TINY_REMOVE,
    _TINY_VOCAB,
    BUILD_TIME_HINT,
    ENCODE_BATCH,
    MAX_TOKENS,
    PRESETS,
    RECIPE_VERSION,
    UNPADDED_VERSION,
    Recipe,
    shipped_vocabulary,
)

if TYPE_CHECKING:
    import numpy as np


def base_model() -> tuple[str, Path]:
    """(model id, directory) of the transformer distilled from: the bundled MiniLM."""
    from .model import DEFAULT_MODEL, resolve_model

    model_id, where = resolve_model(DEFAULT_MODEL)
    return model_id, Path(where)


def _fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "vocab.txt"):
        f = folder / name
        if f.is_file():
            h.update(name.encode() + b"\0" + f.read_bytes())
    weights = folder / "model.safetensors"
    if weights.is_file():
        h.update(b"weights\0" + str(weights.stat().st_size).encode())
    return h.hexdigest()[:12]


def recipe(preset: str | None = None) -> Recipe:
    """The recipe of a preset (default: env CTXKERNEL_STATIC_RECIPE, else "default")."""
    preset = preset or envvars.CTXKERNEL_STATIC_RECIPE.get()
    if preset not in PRESETS:
        raise UserError(f"unknown static recipe {preset!r} (one of {', '.join(PRESETS)})")
    model_id, folder = base_model()
    if preset == "tiny":
        return Recipe(
            preset,
            model_id,
            _fingerprint(folder),
            _TINY_VOCAB,
            pca_dims=64,
            token_remove_pattern=_TINY_REMOVE,
        )
    version = UNPADDED_VERSION if preset == "fast" else RECIPE_VERSION
    return Recipe(preset, model_id, _fingerprint(folder), shipped_vocabulary(), version=version)


def model_dir(digest: str) -> Path:
    from ..config import embedders_dir

    return embedders_dir() / f"static-{digest}"


def is_built(digest: str) -> bool:
    return (model_dir(digest) / "vectors.npy").is_file()


def built_recipe(digest: str) -> dict[str, Any] | None:
    """What a built model's recipe.json says, or None when it is not built."""
    folder = model_dir(digest)
    if not is_built(digest):
        return None
    try:
        data = json.loads((folder / "recipe.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def build(
    rec: Recipe,
    *,
    force: bool = False,
    log: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> Path:
    """Distil the model of ``rec`` into its cache dir (once; later calls return at once).

    Needs torch, transformers and model2vec's distill extra; one build at a time per
    digest (a second process waits for the first and then finds the model built), and
    a model dir only ever appears complete (a killed build leaves a temp dir that the
    next build of that digest removes).
    """
    import fcntl

    target = model_dir(rec.digest)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if is_built(rec.digest) and not force:
                return target
            _distill_into(rec, target, log or (lambda _msg: None), progress)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return target


def _distill_into(
    rec: Recipe, target: Path, log: Callable[[str], None], progress: Progress | None
) -> None:
    from .distill import distill_into
    from .model import quiet_offline_hub

    quiet_offline_hub()
    logging.getLogger("model2vec").setLevel(logging.ERROR)
    model_id, folder = base_model()
    if model_id != rec.base_model or _fingerprint(folder) != rec.base_fingerprint:
        raise UserError(
            f"the static recipe {rec.digest} was distilled from another copy of {rec.base_model}; "
            "re-index with the current one (ctxkernel index NAME)"
        )
    log(
        f"building the static embedder {rec.key} from {model_id} "
        f"({len(rec.vocabulary)} extra identifiers; once, {'seconds' if rec.preset == 'tiny' else BUILD_TIME_HINT.get(rec.version, 'minutes')})"
    )
    t0 = time.perf_counter()
    # leftovers of killed builds of this digest (we hold its lock: none is running)
    for stale in target.parent.glob(f"{target.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = target.parent / f"{target.name}.tmp-{os.getpid()}"
    tmp.mkdir()
    try:
        built = distill_into(rec, folder, tmp, log, progress or Progress())
        info = rec.describe() | {"built_s": round(time.perf_counter() - t0, 1), **built}
        (tmp / "recipe.json").write_text(json.dumps(info, indent=1))
        (tmp / "vocabulary.txt").write_text("\n".join(rec.vocabulary) + "\n")
        # a complete model replaces the old one in one rename: a reader (or a build killed
        # here) sees the old model or the new one, never half of one
        old = target.parent / f"{target.name}.tmp-{os.getpid()}-old"
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"built {rec.key} in {info['built_s']} s")


class StaticModel:
    """A built static model: the tokenizer and one vector per token (float16 on disk)."""

    def __init__(self, folder: Path) -> None:
        import numpy as np
        from tokenizers import Tokenizer

        self.folder = folder
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.vectors = np.load(folder / "vectors.npy", mmap_mode="r")
        unk = getattr(self.tokenizer.model, "unk_token", None)
        self.unk_id = self.tokenizer.token_to_id(unk) if unk else None
        self.dimension = int(self.vectors.shape[1])

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        encoded = self.tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        unk = self.unk_id
        return [[i for i in e.ids if i != unk] if unk is not None else e.ids for e in encoded]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows: the mean of each text's token vectors (model2vec's
        ``StaticModel.encode``); a text with no known token gets a zero row."""
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        if len(texts) > ENCODE_BATCH and self.vectors.dtype != np.float32:
            # many texts (an index run): gather from float32 rows in memory, not the map
            self.vectors = np.asarray(self.vectors, dtype=np.float32)
        for first in range(0, len(texts), ENCODE_BATCH):
            out[first : first + ENCODE_BATCH] = self._encode_batch(
                texts[first : first + ENCODE_BATCH]
            )
        return out

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        ids = self.token_ids(texts)
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        nonempty = np.flatnonzero(lengths)
        if not len(nonempty):
            return out
        flat = np.fromiter((i for x in ids for i in x), dtype=np.int64, count=int(lengths.sum()))
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[nonempty]
        # the segments of empty texts hold no rows, so each start runs to the next one
        sums = np.add.reduceat(np.asarray(self.vectors[flat], dtype=np.float32), starts, axis=0)
        means = sums / lengths[nonempty, None]
        out[nonempty] = means / (np.linalg.norm(means, axis=1, keepdims=True) + 1e-32)
        return out


_LOADED: dict[str, StaticModel] = {}


def load(
    digest: str, rec: Recipe | None = None, log: Callable[[str], None] | None = None
) -> StaticModel:
    """The model of ``digest``, built first when it is the current recipe's and missing."""
    model = _LOADED.get(digest)
    if model is not None:
        return model
    if not is_built(digest):
        if rec is None or rec.digest != digest:
            raise UserError(
                f"the static embedder {digest} is not in {model_dir(digest).parent} and the "
                "current recipe is another one: re-index the corpus (ctxkernel index NAME) "
                "to embed it with the current one"
            )
        build(rec, log=log)
    model = _LOADED[digest] = StaticModel(model_dir(digest))
    return model
