"""Embedders: turn chunk summaries and queries into vectors. Two kinds, chosen per index
run (``--embed``, env ``CTXKERNEL_EMBED``, ``embed`` in config.toml) and recorded by the
store for every corpus, so a corpus is always searched with the embedder that built it:

- ``static`` (the default): a Model2Vec model distilled offline from the bundled
  all-MiniLM-L6-v2 with kernel identifiers in its vocabulary (``embedders/static.py``): a
  tokenizer and a mean of rows, thousands of chunks a second on a CPU, no torch;
- ``minilm`` (the quality mode), or any local sentence-transformers model directory: the
  transformer, loaded once per process, on the GPU in fp16 and large batches when CUDA is
  there; never downloaded unless the user allows it.

The dense side sees a compact text per chunk (path, symbol, signature, docstring,
first lines): the transformer reads at most ``max_seq_length`` tokens anyway, and shorter
inputs embed several times faster on a CPU. The lexical index sees the whole chunk.

Every embedder has a ``key`` (what its vectors depend on: model, recipe, truncation,
text policy): the store records it, the embedding cache is keyed by it, and vectors of
two keys are never searched together.
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from harness import envvars

from ..errors import UserError
from .model import DEFAULT_MODEL, quiet_offline_hub, resolve_model

if TYPE_CHECKING:
    import numpy as np

    from ..corpus import Chunk

DEFAULT_EMBED = "static"  # within 0.02 of MiniLM on eval-dev and eval-test (bench/RESULTS.md)
GPU_BATCH = 512  # texts per forward pass on a GPU (fp16): the H200 has room for far more

_MODELS: dict[tuple[str, str, int], Any] = {}
_LOCK = threading.Lock()


def default_device() -> str:
    forced = envvars.CTXKERNEL_EMBED_DEVICE.get()
    if forced:
        return forced
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def embed_spec(spec: str | None = None, configured: str | None = None) -> str:
    """Which embedder to index with: the argument, env CTXKERNEL_EMBED, the config file's
    ``embed``, a model named by CTXKERNEL_EMBED_MODEL (a transformer), else static."""
    chosen = (
        spec
        or envvars.CTXKERNEL_EMBED.get()
        or configured
        or envvars.CTXKERNEL_EMBED_MODEL.get()
        or DEFAULT_EMBED
    )
    return chosen.strip()


def get_embedder(spec: str | None = None, configured: str | None = None) -> Embedder:
    """The embedder for ``spec``: "static", "minilm" or a sentence-transformers model."""
    chosen = embed_spec(spec, configured)
    if chosen == "static":
        return StaticEmbedder()
    if chosen.startswith("static@"):
        return StaticEmbedder(digest=chosen.split("@", 1)[1])
    if chosen == "minilm":
        return TransformerEmbedder(DEFAULT_MODEL)
    return TransformerEmbedder(chosen)


def embedder_for_record(spec: str, key: str, recipe: str) -> Embedder:
    """The embedder that built a corpus, from what its record says; a clear error when it
    cannot be had (its model is gone and the recipe moved on)."""
    if spec == "static" or key.startswith("static-"):
        return StaticEmbedder(digest=recipe or key.rsplit("@", 1)[-1])
    if not spec:  # a record written before embedders were recorded: the transformer era
        model, _, tokens = key.partition("@")
        return TransformerEmbedder(
            model or DEFAULT_MODEL, max_tokens=int(tokens) if tokens.isdigit() else None
        )
    embedder = get_embedder(spec)
    if embedder.key != key:
        raise UserError(
            f"this corpus was embedded with {key}, but {spec!r} gives {embedder.key} here "
            "(another truncation or text policy); re-index it to embed it again"
        )
    return embedder


class Embedder:
    """What the indexer and the searcher need of an embedder (``static`` or a transformer)."""

    kind: str = ""  # "static" or "transformer"
    spec: str = ""  # how get_embedder finds it again
    key: str = ""  # what its vectors depend on
    text_style: str = "compact"

    def __init__(self) -> None:
        self._queries: dict[str, np.ndarray] = {}

    @property
    def dimension(self) -> int:
        raise NotImplementedError

    @property
    def recipe(self) -> str:
        """A digest of everything the vectors depend on."""
        return hashlib.sha256(self.key.encode()).hexdigest()[:12]

    def describe(self) -> dict[str, Any]:
        return {
            "embedder": self.spec,
            "key": self.key,
            "dim": self.dimension,
            "recipe": self.recipe,
        }

    def text_for(self, chunk: Chunk) -> str:
        return embed_text(chunk, self.text_style)

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        progress: Callable[[int], None] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> np.ndarray:
        raise NotImplementedError

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Token counts to order a batch by (0 when length does not change the cost)."""
        return [0] * len(texts)

    def embed_query(self, query: str) -> np.ndarray:
        """One query's vector; the last few hundred are kept (agents repeat themselves)."""
        vec = self._queries.get(query)
        if vec is None:
            vec = self.embed([query])[0]
            if len(self._queries) >= 512:
                self._queries.pop(next(iter(self._queries)))
            self._queries[query] = vec
        return vec


class StaticEmbedder(Embedder):
    """Static vectors (``static_embed``): built on first use when its model is missing."""

    kind = "static"
    spec = "static"
    BATCH = 2048

    def __init__(self, preset: str | None = None, digest: str | None = None) -> None:
        """The current recipe's embedder, or (``digest``) the one a corpus was built with:
        read from its built model's recipe when that is cached (no recipe computed: a
        search starts faster), else it must be the current recipe's, built on first use."""
        super().__init__()
        from . import static as static_embed

        self._recipe: Any = None
        info = static_embed.built_recipe(digest) if digest else None
        if info is not None:
            self.digest = digest or ""
            self.key = f"static-{info['base_model']}-{info['pca_dims']}d@{self.digest}"
        else:
            self._recipe = static_embed.recipe(preset)
            self.digest = digest or self._recipe.digest
            self.key = (
                self._recipe.key
                if self.digest == self._recipe.digest
                else f"static-{self._recipe.base_model}@{self.digest}"
            )
        self._model: Any = None

    @property
    def recipe(self) -> str:
        return self.digest

    def model(self) -> Any:
        if self._model is None:
            from . import static as static_embed

            self._model = static_embed.load(self.digest, self._recipe, log=_stderr)
        return self._model

    @property
    def dimension(self) -> int:
        return int(self.model().dimension)

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        progress: Callable[[int], None] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> np.ndarray:
        import numpy as np

        model = self.model()
        if not texts:
            return np.zeros((0, model.dimension), dtype=np.float32)
        step = batch_size or self.BATCH
        parts = []
        for start in range(0, len(texts), step):
            parts.append(model.encode(texts[start : start + step]))
            if progress:
                progress(len(parts[-1]))
        return np.concatenate(parts)


def _stderr(message: str) -> None:
    print(f"ctxkernel: {message}", file=sys.stderr, flush=True)


class TransformerEmbedder(Embedder):
    """A sentence-transformers model, shared by every embedder of the same name in the process."""

    kind = "transformer"

    def __init__(
        self,
        model: str | None = None,
        device: str | None = None,
        max_tokens: int | None = None,
    ):
        super().__init__()
        self.model_id, self._load_from = resolve_model(model)
        requested = model or envvars.CTXKERNEL_EMBED_MODEL.get() or DEFAULT_MODEL
        bundled = requested in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}")
        self.spec = "minilm" if bundled else self._load_from
        self._device = device
        self.max_tokens = max_tokens or envvars.CTXKERNEL_EMBED_MAX_TOKENS.get()
        self.text_style = envvars.CTXKERNEL_EMBED_TEXT.get()
        # what a stored vector depends on: model, truncation length, text policy
        self.key = f"{self.model_id}@{self.max_tokens}" + (
            "" if self.text_style == "compact" else f"+{self.text_style}"
        )

    @property
    def device(self) -> str:
        """Resolved on first use: asking torch for CUDA costs a second of start-up."""
        if self._device is None:
            self._device = default_device()
        return self._device

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
                if self.device.startswith("cuda"):
                    model.half()  # fp16 on the GPU: twice the throughput, same ranking
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
        batch_size: int | None = None,
        progress: Callable[[int], None] | None = None,
        lengths: Sequence[int] | None = None,
    ) -> np.ndarray:
        """Unit-length float32 vectors, one row per text (``lengths``: the texts' token
        counts when the caller has them already)."""
        import numpy as np

        model = self._model()
        batch_size = batch_size or (GPU_BATCH if self.device.startswith("cuda") else 64)
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
            out[idx] = np.asarray(vecs, dtype=np.float32)
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

    ``style`` "full" (or env CTXKERNEL_EMBED_TEXT=full for the transformer) embeds the
    chunk text as is, up to the model's window: the naive baseline the benchmarks compare
    against.
    """
    style = style or envvars.CTXKERNEL_EMBED_TEXT.get()
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
