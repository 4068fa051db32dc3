"""Optional cross-encoder rerank of search hits: off by default, local models only.

A cross-encoder reads the query and each candidate together and scores the pair; it is
slower than the fused ranking (one model call per candidate) and sometimes better on
how-to questions. No cross-encoder ships offline, so the model is the user's: a local
directory (a Hugging Face model saved with ``save_pretrained``, such as
``cross-encoder/ms-marco-MiniLM-L6-v2``) given by ``--rerank-model`` or
``CTXKERNEL_RERANK_MODEL``. Nothing is downloaded unless ``CTXKERNEL_ALLOW_DOWNLOAD=1``,
in which case a hub id is accepted too.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import envvars

from .embedders.model import quiet_offline_hub
from .errors import UserError

if TYPE_CHECKING:
    from .corpus import Hit

RERANK_POOL = 30  # fused candidates the cross-encoder re-scores (at least 3 x k)
PAIR_CHARS = 1200  # of each chunk's text read with the query (the model's window is short)

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def resolve_rerank_model(model: str | None) -> str:
    """The local directory (or, with downloads allowed, the hub id) of the cross-encoder."""
    name = model or envvars.CTXKERNEL_RERANK_MODEL.get() or ""
    if not name:
        raise UserError(
            "--rerank needs a local cross-encoder model: pass --rerank-model DIR or set "
            "CTXKERNEL_RERANK_MODEL (nothing is downloaded unless CTXKERNEL_ALLOW_DOWNLOAD=1)"
        )
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"rerank model {name!r}: no config.json there (not a saved model)")
        return str(path)
    if envvars.CTXKERNEL_ALLOW_DOWNLOAD.get():
        return name
    raise UserError(
        f"rerank model {name!r} is not a local directory; download it once with "
        "CTXKERNEL_ALLOW_DOWNLOAD=1 or point --rerank-model at a saved copy"
    )


def _cross_encoder(location: str) -> Any:
    with _LOCK:
        model = _MODELS.get(location)
        if model is None:
            quiet_offline_hub()
            from sentence_transformers import CrossEncoder

            try:
                model = CrossEncoder(location, max_length=256)
            except (OSError, ValueError) as exc:
                raise UserError(f"could not load the rerank model {location!r}: {exc}") from exc
            _MODELS[location] = model
    return model


def pair_text(hit: Hit) -> str:
    """What the cross-encoder reads of a hit: where it is, what it is, then its text."""
    c = hit.chunk
    head = " ".join(p for p in (c.path, c.symbol, c.title if c.title != c.symbol else "") if p)
    return f"{head}\n{c.text}"[:PAIR_CHARS]


def rerank_hits(query: str, hits: list[Hit], k: int, model: str | None = None) -> list[Hit]:
    """``hits`` re-ordered by the cross-encoder's score for (query, hit), cut to ``k``.

    Each hit keeps its fused score in ``extra["fused_score"]``; ``score`` becomes the
    cross-encoder's and ``via`` gains ``+rerank``.
    """
    if not hits:
        return []
    encoder = _cross_encoder(resolve_rerank_model(model))
    scores = encoder.predict(
        [(query, pair_text(h)) for h in hits], show_progress_bar=False, convert_to_numpy=True
    )
    for hit, score in zip(hits, scores, strict=True):
        hit.extra["fused_score"] = hit.score
        hit.score = float(score)
        hit.via = f"{hit.via}+rerank"
    ranked = sorted(hits, key=lambda h: -h.score)[:k]
    for i, hit in enumerate(ranked, 1):
        hit.rank = i
    return ranked
