"""The static embedder's recipe: everything its vectors depend on (``Recipe``, its digest and
store key), the presets' constants and the identifier list that ships with the package."""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

# A recipe's version says how its rows are made. 2: model2vec's distill as it is (each
# identifier averaged with the ~120 pads of MiniLM's fixed padding), then our identifier
# rows; 3: the same with the padding off (static_distill's docstring), 5x less CPU to
# build. The default stays 2 until 3 passes the quality rule (bench/RESULTS.md:
# eval-test Recall@10 -0.008, outside 0.005); the "fast" preset is 3.
RECIPE_VERSION = 2
UNPADDED_VERSION = 3
# measured (bench/RESULTS.md): version 2 about 70 CPU seconds with the transformer rows of
# its padded identifiers shipped (static_distill.SHIPPED_ROWS; 520 without them), 3 about 100
BUILD_TIME_HINT = {2: "about a minute on 2 cores", 3: "about 1.5 minutes on 2 cores"}
VOCAB_FILE = Path(__file__).resolve().parent.parent / "data" / "static_vocab.txt"
# Base tokens model2vec drops by default; the "tiny" preset also drops whole words of
# four letters or more (about 2,000 base tokens are left): a model that builds in
# seconds, for tests and quick tries, not for real corpora.
_DEFAULT_REMOVE = r"\[unused\d+\]"
_TINY_REMOVE = r"\[unused\d+\]|.*[^\x00-\x7f]|[a-z]{4,}$|##[a-z]{3,}$|\d\d"
_TINY_VOCAB = (
    "make_tiled_copy",
    "local_tile",
    "tl.dot",
    "tl.load",
    "cp.async.bulk.tensor",
    "wgmma.mma_async",
    "mbarrier",
    "ldmatrix",
)
MAX_TOKENS = 512  # model2vec's default cap on the tokens of one text
ENCODE_BATCH = 256  # texts per gather: 256 x ~130 tokens x 1 KB rows stay small


@dataclass(frozen=True)
class Recipe:
    """Everything the vectors of a static model depend on."""

    preset: str
    base_model: str  # the model id of the transformer distilled from
    base_fingerprint: str  # its config and weights, so a different copy gets another digest
    vocabulary: tuple[str, ...] = field(repr=False)
    pca_dims: int = 256
    sif_coefficient: float = 1e-4
    token_remove_pattern: str = _DEFAULT_REMOVE
    # an identifier row's direction: this share from the sum of its pieces' rows, the
    # rest from its own (contextual) vector; measured on the dev queries (0.4-1.0 alike)
    identifier_mix: float = 0.7
    version: int = RECIPE_VERSION  # last: the digests of version 2 recipes stay as they were

    @functools.cached_property
    def digest(self) -> str:
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # no deep copy
        data["vocabulary"] = list(self.vocabulary)
        blob = json.dumps(data, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    @property
    def key(self) -> str:
        """What the store records and the embedding cache is keyed by."""
        return f"static-{self.base_model}-{self.pca_dims}d@{self.digest}"

    def describe(self) -> dict[str, Any]:
        return {
            "preset": self.preset,
            "base_model": self.base_model,
            "base_fingerprint": self.base_fingerprint,
            "vocabulary_size": len(self.vocabulary),
            "vocabulary_sha": hashlib.sha256("\n".join(self.vocabulary).encode()).hexdigest()[:12],
            "pca_dims": self.pca_dims,
            "sif_coefficient": self.sif_coefficient,
            "token_remove_pattern": self.token_remove_pattern,
            "identifier_mix": self.identifier_mix,
            "digest": self.digest,
            "version": self.version,
        }


PRESETS = ("default", "fast", "tiny")


def shipped_vocabulary() -> tuple[str, ...]:
    """The identifier list that ships with the package (one name a line, ``#`` comments)."""
    if not VOCAB_FILE.is_file():
        return ()
    names: list[str] = []
    for line in VOCAB_FILE.read_text().splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            names.append(name)
    return tuple(dict.fromkeys(names))
