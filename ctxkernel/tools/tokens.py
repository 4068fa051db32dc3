"""Token counts of tool results, with the embedding model's own tokenizer (its
``tokenizer.json``, loaded once through the ``tokenizers`` library, without torch or
transformers).

A token covers at least one character, so a text's length is an upper bound on its
count: callers count only when that bound does not already settle the question. Where
the model has no ``tokenizer.json`` the count falls back to ``FALLBACK_CHARS_PER_TOKEN``
characters a token, which is below what code and the PTX tables were measured at
(2.2-3.2 characters a WordPiece token).

Counting is exact and fast for a BERT WordPiece tokenizer (the MiniLM models'): its
pre-tokenizer cuts a text at whitespace and around every punctuation character before
any word is split into pieces, so a text's count is the sum of its words' counts. In the
lines of plain ASCII (nearly all of a tool result) the words are found with one regex,
which splits them exactly as the tokenizer does, and each distinct word is counted once
per process, by WordPiece's rule over the tokenizer's vocabulary, and remembered: a
result of 10,000 characters costs about half a millisecond instead of the ~10 ms of
tokenizing it. Any other piece between ASCII whitespace (one with a non-ASCII character,
or holding one of the tokenizer's special tokens such as ``[CLS]``) is tokenized whole
and remembered whole: whitespace separates words for the tokenizer too, so the pieces'
counts add up.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

FALLBACK_CHARS_PER_TOKEN = 2.0
LONGEST_TOKEN_CHARS = 24  # no vocabulary entry is longer: a lower bound for huge texts
MEMO_WORDS = 400_000  # distinct pieces remembered before the memo starts over

_LOCK = threading.Lock()
_TOKENIZER: Any = None  # a tokenizers.Tokenizer, False when none could be loaded
_SPLIT: Any = None  # a _WordCounter when the tokenizer splits as BERT's does, else False

# a line of ASCII without control characters (but tab and carriage return): in such a
# line BERT's normalizer changes nothing but case, and every character is a letter or
# digit (runs of them form a word), whitespace, or punctuation (a word of its own)
_ODD = re.compile(r"[^\t\n\r\x20-\x7e]")
_WORD = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")
_PIECE = re.compile(r"[^\t\r ]+")  # the text between ASCII whitespace, in one line


def _tokenizer() -> Any:
    global _TOKENIZER, _SPLIT
    with _LOCK:
        if _TOKENIZER is None:
            _TOKENIZER = _load() or False
            _SPLIT = (_WordCounter.of(_TOKENIZER) if _TOKENIZER else None) or False
    return _TOKENIZER


def _load() -> Any:
    try:
        from tokenizers import Tokenizer

        from ..embedders.model import resolve_model

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


class _WordCounter:
    """Counts of a BERT WordPiece tokenizer summed over the pieces of a text between
    whitespace, each distinct piece counted once per process.

    A plain piece's words are counted by WordPiece's own rule over the tokenizer's
    vocabulary (``wordpiece``), without a call into the tokenizer; other pieces are
    tokenized."""

    def __init__(self, tok: Any, specials: list[str], lowercase: bool, longest: int) -> None:
        self.tok = tok
        self.specials = specials
        self.lowercase = lowercase
        self.longest = longest  # max_input_chars_per_word: a longer word is one [UNK]
        vocab = tok.get_vocab()
        self.starts = frozenset(w for w in vocab if not w.startswith("##"))
        self.follows = frozenset(w[2:] for w in vocab if w.startswith("##"))
        self.memo: dict[str, int] = {}  # piece (no whitespace in it) -> its tokens

    @staticmethod
    def of(tok: Any) -> _WordCounter | None:
        """A counter for ``tok`` when its pipeline is BERT's, else None."""
        try:
            config = json.loads(tok.to_str())
        except Exception:  # tokenizers' Rust errors are plain Exception: not BERT's then
            return None
        normalizer = config.get("normalizer") or {}
        model = config.get("model") or {}
        if (
            normalizer.get("type") != "BertNormalizer"
            or not normalizer.get("clean_text", False)
            or (config.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer"
            or model.get("type") != "WordPiece"
            or model.get("continuing_subword_prefix") != "##"
        ):
            return None
        added = config.get("added_tokens") or []
        if any(a.get("normalized", True) for a in added):
            return None  # matched after lowercasing: not worth the cases
        specials = [str(a.get("content", "")) for a in added if a.get("content")]
        longest = int(model.get("max_input_chars_per_word", 100))
        return _WordCounter(tok, specials, bool(normalizer.get("lowercase", True)), longest)

    def wordpiece(self, word: str) -> int:
        """Tokens of one plain word (a run of letters and digits, or one punctuation
        character): greedy longest-match-first over the vocabulary, continuing pieces
        after the first; one [UNK] when some part matches nothing."""
        w = word.lower() if self.lowercase else word
        if len(w) > self.longest:
            return 1
        n, start, end = 0, 0, len(w)
        table = self.starts
        while start < end:
            stop = end
            while start < stop and w[start:stop] not in table:
                stop -= 1
            if stop == start:
                return 1  # the whole word is [UNK]
            n += 1
            start = stop
            table = self.follows
        return n

    def count(self, text: str) -> int:
        """The text's token count: the sum of its pieces' counts."""
        if _ODD.search(text) is None:
            pieces = text.split()  # plain text: str.split cuts at exactly its whitespace
        else:
            pieces = []
            for line in text.split("\n"):
                pieces.extend(line.split() if _ODD.search(line) is None else _PIECE.findall(line))
        memo = self.memo
        try:
            return sum(map(memo.__getitem__, pieces))
        except KeyError:
            pass
        missing = {p for p in pieces if p not in memo}
        if len(memo) + len(missing) > MEMO_WORDS:
            memo.clear()
            missing = set(pieces)
        self._learn(missing)
        return sum(map(memo.__getitem__, pieces))

    def _learn(self, pieces: set[str]) -> None:
        memo, specials = self.memo, self.specials
        whole: list[str] = []  # pieces the tokenizer counts as they are
        for piece in pieces:
            if _ODD.search(piece) is not None or any(s in piece for s in specials):
                whole.append(piece)
                continue
            total = 0
            for w in _WORD.findall(piece):
                n = memo.get(w)
                if n is None:
                    n = memo[w] = self.wordpiece(w)
                total += n
            memo[piece] = total
        if whole:
            found = self.tok.encode_batch(whole, add_special_tokens=False)
            for piece, enc in zip(whole, found, strict=True):
                memo[piece] = len(enc.ids)


def count(texts: Sequence[str]) -> list[int]:
    """The token count of each text (no special tokens)."""
    tok = _tokenizer()
    if not tok:
        return [math.ceil(len(t) / FALLBACK_CHARS_PER_TOKEN) for t in texts]
    if not _SPLIT:
        return [len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=False)]
    with _LOCK:
        return [_SPLIT.count(t) for t in texts]


def lower_bound(text: str) -> int:
    """At least this many tokens, without tokenizing (for texts too long to be worth it)."""
    return len(text) // LONGEST_TOKEN_CHARS
