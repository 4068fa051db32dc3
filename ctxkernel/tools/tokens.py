"""Token counts of tool results, with the embedding model's own tokenizer (its
``tokenizer.json``, loaded once through the ``tokenizers`` library, without torch or
transformers).

A token covers at least one character, so a text's length is an upper bound on its
count: callers count only when that bound does not already settle the question. Where
the model has no ``tokenizer.json`` the count falls back to ``FALLBACK_CHARS_PER_TOKEN``
characters a token, which is below what code and the PTX tables were measured at
(2.2-3.2 characters a WordPiece token).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FALLBACK_CHARS_PER_TOKEN = 2.0
LONGEST_TOKEN_CHARS = 24  # no vocabulary entry is longer: a lower bound for huge texts

_LOCK = threading.Lock()
_TOKENIZER: Any = None  # a tokenizers.Tokenizer, False when none could be loaded


def _tokenizer() -> Any:
    global _TOKENIZER
    with _LOCK:
        if _TOKENIZER is None:
            _TOKENIZER = _load() or False
    return _TOKENIZER


def _load() -> Any:
    try:
        from tokenizers import Tokenizer

        from ..embed import resolve_model

        _, where = resolve_model()
        file = Path(where) / "tokenizer.json"
        if not file.is_file():
            return None
        tok = Tokenizer.from_file(str(file))
        tok.no_truncation()
        tok.no_padding()
        return tok
    except Exception:  # no tokenizer here: the character estimate stands in
        return None


def count(texts: Sequence[str]) -> list[int]:
    """The token count of each text (no special tokens)."""
    tok = _tokenizer()
    if not tok:
        return [math.ceil(len(t) / FALLBACK_CHARS_PER_TOKEN) for t in texts]
    return [len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=False)]


def lower_bound(text: str) -> int:
    """At least this many tokens, without tokenizing (for texts too long to be worth it)."""
    return len(text) // LONGEST_TOKEN_CHARS
