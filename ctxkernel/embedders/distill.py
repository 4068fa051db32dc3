"""Distilling a static model: the one-time build behind ``static.build``.

The recipe is model2vec's ``distill_from_model`` (its tokenizer surgery, Zipf/SIF weights,
PCA and float16 rows), run step by step so that:

- The transformer runs over sequences grouped by length, so a batch holds no padding and
  needs no mask, 16k tokens at a time (model2vec: 256 sequences whatever their length);
  the mean over positions is model2vec's mean pooling.
- From recipe version 3, every vocabulary entry goes through the transformer as
  ``[CLS] pieces [SEP]`` and nothing else. model2vec's ``turn_tokens_into_ids`` encodes the
  multi-piece entries (all our identifiers) with the base tokenizer as it is saved, and
  MiniLM's tokenizer pads to a fixed 128: each identifier becomes ``[CLS] pieces [SEP]``
  plus ~120 ``[PAD]`` tokens, all attended and averaged. In version 2 (model2vec as it is)
  91 % of the tokens the transformer sees are padding, and every identifier row leans
  towards one shared direction. Version 3's rows are those of ``distill_from_model`` given
  the base tokenizer with its padding turned off, version 2's those of ``distill`` itself
  (``tests/retrieval/test_static_build.py`` checks both).

Then the identifier rows are reshaped (``identifier_rows``, see ``static_embed``).

A transformer row is a function of the base model and one token sequence only, so the
rows of the default recipe's 7,336 padded identifiers (939,008 tokens, 90 % of its build)
are computed once by ``bench/ship_static_rows.py`` and ship in ``SHIPPED_ROWS``, keyed by
a hash of each sequence and the base model's fingerprint; the build computes the rest
(the base tokens, any sequence the file lacks) and gets the same model within float16
rounding (bench/RESULTS.md: every eval group's Recall@10 and MRR@10 unchanged).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..progress import Progress
from .recipe import UNPADDED_VERSION

if TYPE_CHECKING:
    import numpy as np

    from .recipe import Recipe

# tokens per forward pass: on 2 cores 16,384 took 17 % less CPU than 4,096 (and than
# model2vec's 256 sequences of 3 tokens: 768) over the same sequences; the activations of
# one pass stay in a few hundred MB
TOKENS_PER_BATCH = 16384
log = logging.getLogger(__name__)
# The transformer's rows of the default recipe's padded identifiers (version 2: 7,336
# sequences of 128 tokens, 90 % of its build's CPU time), computed once by
# ``bench/ship_static_rows.py`` and shipped; the build computes only what is not in it.
SHIPPED_ROWS = Path(__file__).resolve().parent.parent / "data" / "static_identifier_rows.npz"
SHIP_MIN_TOKENS = 3  # a base token is [CLS] id [SEP]: cheap, never shipped


def _imports() -> SimpleNamespace:
    """The distill extra's parts (model2vec, skeletoken, transformers), or a UserError."""
    try:
        from model2vec import StaticModel as M2VModel
        from model2vec.distill.inference import apply_pca, compute_weights
        from model2vec.quantization import DType, quantize_embeddings
        from model2vec.tokenizer import clean_and_create_vocabulary
        from skeletoken import TokenizerModel
        from skeletoken.external.transformers import reshape_embeddings
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise UserError(
            f"building the static embedder needs model2vec's distill extra ({exc}): "
            "pip install model2vec skeletoken (or use --embed minilm)"
        ) from exc
    return SimpleNamespace(
        M2VModel=M2VModel,
        apply_pca=apply_pca,
        compute_weights=compute_weights,
        DType=DType,
        quantize_embeddings=quantize_embeddings,
        clean_and_create_vocabulary=clean_and_create_vocabulary,
        TokenizerModel=TokenizerModel,
        reshape_embeddings=reshape_embeddings,
        AutoModel=AutoModel,
        AutoTokenizer=AutoTokenizer,
    )


def prepare(rec: Recipe, folder: Path) -> dict[str, Any]:
    """model2vec's ``distill_from_model`` up to the transformer: the model, the tokenizers
    and the token ids of every vocabulary entry (``ids``, in ``tokens``' order)."""
    m = _imports()
    model = m.AutoModel.from_pretrained(str(folder))
    tokenizer = m.AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    original = m.TokenizerModel.from_transformers_tokenizer(tokenizer).prune_added_tokens()
    tokenizer_model = original.deep_copy()
    if tokenizer_model.adds_prefix_space is not None:
        tokenizer_model.adds_prefix_space = True
    pattern = re.compile(rec.token_remove_pattern) if rec.token_remove_pattern else None
    tokenizer_model = m.clean_and_create_vocabulary(tokenizer_model, list(rec.vocabulary), pattern)
    all_tokens = tokenizer_model.sorted_vocabulary
    if not all_tokens:
        raise UserError("the static recipe's vocabulary is empty after its remove pattern")
    ids = token_ids(all_tokens, original, padded=rec.version < UNPADDED_VERSION)
    model = m.reshape_embeddings(model, original)
    return {"model": model, "tokenizer_model": tokenizer_model, "tokens": all_tokens, "ids": ids}


def distill_into(
    rec: Recipe, folder: Path, out: Path, log: Callable[[str], None], progress: Progress
) -> dict[str, Any]:
    """Distil ``rec`` from the transformer in ``folder`` and write the model into ``out``
    (model2vec's files plus our ``vectors.npy``); returns what to add to recipe.json."""
    import numpy as np

    m = _imports()
    t0 = time.perf_counter()
    prepared = prepare(rec, folder)
    model, tokenizer_model, ids = prepared["model"], prepared["tokenizer_model"], prepared["ids"]
    t_prep = time.perf_counter() - t0
    shipped = shipped_rows(rec.base_fingerprint, ids)
    todo = [i for i in range(len(ids)) if i not in shipped]
    n_tokens = sum(len(ids[i]) for i in todo)
    log(
        f"embedding {len(todo)} vocabulary entries ({n_tokens} tokens) with {rec.base_model}"
        + (f"; {len(shipped)} rows shipped with ctxkernel" if shipped else "")
    )
    t1 = time.perf_counter()
    task = progress.task("static embedder: vocabulary through the transformer", n_tokens)
    computed = contextual_rows(model, [ids[i] for i in todo], task.advance)
    task.done()
    rows = np.zeros((len(ids), int(model.config.hidden_size)), np.float32)
    if todo:
        rows[todo] = computed
    for i, row in shipped.items():
        rows[i] = row
    t_embed = time.perf_counter() - t1
    weights = m.compute_weights(len(rows), sif_coefficient=rec.sif_coefficient)
    rows = m.apply_pca(rows, rec.pca_dims) * weights[:, None]
    rows = m.quantize_embeddings(rows, m.DType.Float16)
    static = m.M2VModel(
        vectors=rows,
        tokenizer=tokenizer_model.to_tokenizer(),
        config={
            "model_type": "model2vec",
            "architectures": ["StaticModel"],
            "tokenizer_name": str(folder),
            "apply_pca": rec.pca_dims,
            "sif_coefficient": rec.sif_coefficient,
            "hidden_dim": rows.shape[1],
            "seq_length": 1000000,
            "normalize": True,
            "pooling": "mean",
        },
        base_model_name=folder.name,
        normalize=True,
    )
    static.save_pretrained(str(out))
    final = identifier_rows(
        np.asarray(rows, dtype=np.float32),
        json.loads((out / "tokenizer.json").read_text()),
        json.loads((folder / "tokenizer.json").read_text()),
        rec.identifier_mix,
    )
    # our rows (model2vec's file keeps its own), for a fast load (mmap) without safetensors
    np.save(out / "vectors.npy", final.astype(np.float16))
    return {
        "rows": len(final),
        "tokens_embedded": n_tokens,
        "rows_shipped": len(shipped),
        "tokens_shipped": sum(len(ids[i]) for i in shipped),
        "stages_s": {
            "prepare": round(t_prep, 1),
            "transformer": round(t_embed, 1),
            "rest": round(time.perf_counter() - t1 - t_embed, 1),
        },
    }


def _sequence_key(ids: Sequence[int]) -> int:
    import numpy as np

    blob = np.asarray(ids, dtype=np.int32).tobytes()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "little")


def shipped_rows(base_fingerprint: str, ids: Sequence[Sequence[int]]) -> dict[int, np.ndarray]:
    """{index in ``ids``: row} for the sequences whose transformer output ships with the
    package (``SHIPPED_ROWS``): a row is the base model's mean output over one token
    sequence, so it holds for any recipe that feeds that model that sequence. Nothing
    when the file is missing or was made from another copy of the base model."""
    import numpy as np

    if not SHIPPED_ROWS.is_file():
        return {}
    try:
        with np.load(SHIPPED_ROWS, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("base_fingerprint") != base_fingerprint:
                return {}
            keys, rows, mean = data["keys"], data["rows"], data["mean"]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        # a damaged file costs time, never a wrong model: every row is computed
        log.warning("%s unreadable (%s): computing every row", SHIPPED_ROWS.name, exc)
        return {}
    if rows.shape != (len(keys), mean.shape[0]):
        return {}
    where = {int(k): j for j, k in enumerate(keys.tolist())}
    out: dict[int, np.ndarray] = {}
    for i, seq in enumerate(ids):
        if len(seq) > SHIP_MIN_TOKENS:
            j = where.get(_sequence_key(seq))
            if j is not None:
                out[i] = rows[j].astype(np.float32) + mean
    return out


def write_shipped_rows(
    rec: Recipe, folder: Path, path: Path, progress: Progress | None = None
) -> dict[str, Any]:
    """Compute the rows ``shipped_rows`` reads for ``rec``'s long sequences (its padded
    identifiers) and write them to ``path``: their float32 mean, and each row's float16
    difference from it."""
    import numpy as np

    prepared = prepare(rec, folder)
    ids = prepared["ids"]
    chosen = [i for i, seq in enumerate(ids) if len(seq) > SHIP_MIN_TOKENS]
    n_tokens = sum(len(ids[i]) for i in chosen)
    task = (progress or Progress()).task("shipped rows through the transformer", n_tokens)
    rows = contextual_rows(prepared["model"], [ids[i] for i in chosen], task.advance)
    task.done()
    keys = np.array([_sequence_key(ids[i]) for i in chosen], dtype=np.uint64)
    # float16 of what each row adds to the rows' mean (kept in float32): the padded rows
    # share one direction, and their difference from it is what the recipe keeps
    mean = rows.mean(axis=0, dtype=np.float64).astype(np.float32)
    meta = {
        "base_model": rec.base_model,
        "base_fingerprint": rec.base_fingerprint,
        "recipe_version": rec.version,
        "sequences": len(chosen),
        "tokens": n_tokens,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        np.savez_compressed(
            fh,
            keys=keys,
            mean=mean,
            rows=(rows - mean).astype(np.float16),
            meta=np.array(json.dumps(meta)),
        )
    return meta


def token_ids(tokens: Sequence[str], original: Any, *, padded: bool = False) -> list[list[int]]:
    """model2vec's ``turn_tokens_into_ids``: a base token is ``[CLS] id [SEP]``, anything
    else the base tokenizer's pieces of it, padded as that tokenizer pads (``padded``, as
    model2vec does) or not."""
    prefix, suffix = original.bos_ids or [], original.eos_ids or []
    vocabulary = original.vocabulary
    tokenizer = original.to_tokenizer()
    if not padded:
        tokenizer.no_padding()
    out: list[list[int]] = [[] for _ in tokens]
    rest: list[int] = []
    for i, token in enumerate(tokens):
        known = vocabulary.get(token)
        if known is None:
            rest.append(i)
        else:
            out[i] = [*prefix, known, *suffix]
    for i, enc in zip(rest, tokenizer.encode_batch([tokens[i] for i in rest]), strict=True):
        out[i] = list(enc.ids)
    return out


def contextual_rows(
    model: Any, ids: Sequence[Sequence[int]], advance: Callable[[int], None] | None = None
) -> np.ndarray:
    """The transformer's mean output over each sequence's positions (float32 rows in the
    order of ``ids``): sequences of one length per batch, so no padding and no mask."""
    import numpy as np
    import torch

    model = model.to("cpu").eval()
    takes_types = "token_type_ids" in inspect.getfullargspec(model.forward).args
    width = int(model.config.hidden_size)
    out = np.zeros((len(ids), width), dtype=np.float32)
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    with torch.inference_mode():
        for length in np.unique(lengths):
            if length == 0:
                continue
            members = np.flatnonzero(lengths == length)
            step = max(1, TOKENS_PER_BATCH // int(length))
            for first in range(0, len(members), step):
                rows = members[first : first + step]
                batch = torch.tensor([ids[i] for i in rows], dtype=torch.long)
                inputs = {"input_ids": batch, "attention_mask": torch.ones_like(batch)}
                if takes_types:
                    inputs["token_type_ids"] = torch.zeros_like(batch)
                hidden = model(**inputs).last_hidden_state.float()
                out[rows] = hidden.mean(dim=1).numpy()
                if advance:
                    advance(int(batch.numel()))
    return np.nan_to_num(out)


def identifier_rows(
    vectors: np.ndarray, tokenizer: dict[str, Any], base_tokenizer: dict[str, Any], mix: float
) -> np.ndarray:
    """Reshape the rows of the tokens the vocabulary added (see ``static_embed``'s docstring)."""
    import numpy as np
    from tokenizers import Tokenizer

    base_vocab = set((base_tokenizer.get("model") or {}).get("vocab") or {})
    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    added = {a["id"]: a["content"] for a in tokenizer.get("added_tokens", []) if not a["special"]}
    words = {i: t for t, i in vocab.items() if t not in base_vocab} | added
    if not words:
        return vectors
    custom = np.fromiter(sorted(words), dtype=np.int64, count=len(words))
    base = np.setdiff1d(np.arange(len(vectors)), custom)
    # a tokenizer without the added names splits each into the pieces it replaces
    pieces_json = dict(tokenizer)
    pieces_json["added_tokens"] = [a for a in tokenizer.get("added_tokens", []) if a["special"]]
    pieces_json["model"] = dict(tokenizer["model"])
    pieces_json["model"]["vocab"] = {t: i for t, i in vocab.items() if i not in words}
    pieces = Tokenizer.from_str(json.dumps(pieces_json))
    pieces.no_padding()
    pieces.no_truncation()
    unk = vocab.get(tokenizer["model"].get("unk_token", ""), -1)
    own = vectors[custom] - (vectors[custom].mean(axis=0) - vectors[base].mean(axis=0))
    base_norm = float(np.linalg.norm(vectors[base], axis=1).mean())
    out = vectors.copy()
    encoded = pieces.encode_batch([words[int(i)].strip() for i in custom], add_special_tokens=False)
    for j, (i, enc) in enumerate(zip(custom, encoded, strict=True)):
        ids = [t for t in enc.ids if t != unk]
        mine = own[j] / (np.linalg.norm(own[j]) + 1e-9)
        if not ids:
            out[i] = mine * base_norm
            continue
        total = vectors[ids].sum(axis=0)
        length = float(np.linalg.norm(total)) + 1e-9
        direction = mix * total / length + (1 - mix) * mine
        out[i] = direction / (np.linalg.norm(direction) + 1e-9) * length
    return out
