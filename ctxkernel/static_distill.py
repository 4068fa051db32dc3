"""Distilling a static model: the one-time build behind ``static_embed.build``.

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
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UserError
from .progress import Progress
from .static_embed import UNPADDED_VERSION

if TYPE_CHECKING:
    import numpy as np

    from .static_embed import Recipe

# tokens per forward pass: on 2 cores 16,384 took 17 % less CPU than 4,096 (and than
# model2vec's 256 sequences of 3 tokens: 768) over the same sequences; the activations of
# one pass stay in a few hundred MB
TOKENS_PER_BATCH = 16384


def distill_into(
    rec: Recipe, folder: Path, out: Path, log: Callable[[str], None], progress: Progress
) -> dict[str, Any]:
    """Distil ``rec`` from the transformer in ``folder`` and write the model into ``out``
    (model2vec's files plus our ``vectors.npy``); returns what to add to recipe.json."""
    try:
        import numpy as np
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
    t0 = time.perf_counter()
    model = AutoModel.from_pretrained(str(folder))
    tokenizer = AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    # model2vec's distill_from_model, step by step
    original = TokenizerModel.from_transformers_tokenizer(tokenizer).prune_added_tokens()  # type: ignore[arg-type]
    tokenizer_model = original.deep_copy()
    if tokenizer_model.adds_prefix_space is not None:
        tokenizer_model.adds_prefix_space = True
    pattern = re.compile(rec.token_remove_pattern) if rec.token_remove_pattern else None
    tokenizer_model = clean_and_create_vocabulary(tokenizer_model, list(rec.vocabulary), pattern)
    all_tokens = tokenizer_model.sorted_vocabulary
    if not all_tokens:
        raise UserError("the static recipe's vocabulary is empty after its remove pattern")
    ids = token_ids(all_tokens, original, padded=rec.version < UNPADDED_VERSION)
    model = reshape_embeddings(model, original)
    t_prep = time.perf_counter() - t0
    n_tokens = sum(len(x) for x in ids)
    log(f"embedding {len(ids)} vocabulary entries ({n_tokens} tokens) with {rec.base_model}")
    t1 = time.perf_counter()
    task = progress.task("static embedder: vocabulary through the transformer", n_tokens)
    rows = contextual_rows(model, ids, task.advance)
    task.done()
    t_embed = time.perf_counter() - t1
    weights = compute_weights(len(rows), sif_coefficient=rec.sif_coefficient)
    rows = apply_pca(rows, rec.pca_dims) * weights[:, None]
    rows = quantize_embeddings(rows, DType.Float16)
    static = M2VModel(
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
        "stages_s": {
            "prepare": round(t_prep, 1),
            "transformer": round(t_embed, 1),
            "rest": round(time.perf_counter() - t1 - t_embed, 1),
        },
    }


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
