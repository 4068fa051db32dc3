"""Lexical tokenizer that understands kernel identifiers.

``cp.async.bulk.tensor`` gives the whole name plus ``cp``, ``async``, ``bulk``,
``tensor``; ``make_tiled_copy`` gives itself plus ``make``, ``tiled``, ``copy``;
``TiledCopy`` gives ``tiledcopy``, ``tiled``, ``copy``; ``cute::make_layout`` and
``cute.make_layout`` give the dotted/``::`` compound in one normal form
(``cute.make_layout``) plus every part. PTX directives keep their dot (``.reqntid``).
Everything is lower-cased; a short stop-word list drops English glue.
"""

from __future__ import annotations

import re
from typing import Any

_IDENT = re.compile(r"\.?[A-Za-z_%][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_0-9][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "use",
        "using",
        "used",
    ]
)


_STEMMER: Any = None
_STEMS: dict[str, str] = {}


def stem(word: str) -> str:
    """English stem of a lower-case word (``launching`` -> ``launch``, ``dependents`` ->
    ``depend``), so plain-words queries meet prose that inflects differently."""
    got = _STEMS.get(word)
    if got is None:
        global _STEMMER
        if _STEMMER is None:
            import snowballstemmer

            _STEMMER = snowballstemmer.stemmer("english")
        got = _STEMS[word] = _STEMMER.stemWord(word) if len(_STEMS) < 200_000 else word
    return got


def _sub_words(part: str) -> list[str]:
    words: list[str] = [part] if "_" in part.strip("_") else []
    for piece in part.split("_"):
        if not piece:
            continue
        found = _CAMEL.findall(piece)
        if len(found) > 1:
            words.extend(found)
        words.append(piece)
    return words


_EXPANDED: dict[str, tuple[str, ...]] = {}
_EXPANDED_MAX = 500_000  # distinct identifiers remembered (CUTLASS has about 200,000)


def tokenize(text: str) -> list[str]:
    """Tokens for indexing and querying (order kept, duplicates kept: BM25 counts them)."""
    tokens: list[str] = []
    memo = _EXPANDED
    for raw in _IDENT.findall(text):
        got = memo.get(raw)
        if got is None:
            got = _expand(raw)
            if len(memo) < _EXPANDED_MAX:
                memo[raw] = got
        tokens.extend(got)
    return tokens


def _expand(raw: str) -> tuple[str, ...]:
    """The tokens of one identifier-like match (code repeats the same names: memoised)."""
    tokens: list[str] = []
    leading_dot = raw.startswith(".")
    body = raw[1:] if leading_dot else raw
    compound = body.replace("::", ".")
    parts = [p for p in compound.split(".") if p]
    if leading_dot and len(parts) == 1:
        tokens.append("." + parts[0].lower())  # a PTX directive or modifier
    if len(parts) > 1:
        tokens.append(compound.lower())
        # also every dotted suffix of length >= 2 (``tl.dot`` inside ``triton.language.dot``)
        for i in range(1, len(parts) - 1):
            tokens.append(".".join(parts[i:]).lower())
    for part in parts:
        lower = part.lower()
        if lower in STOPWORDS and len(parts) == 1:
            continue
        subs = _sub_words(part)
        emitted = False
        for word in subs:
            w = word.lower()
            if (len(w) > 1 or w.isdigit()) and w not in STOPWORDS:
                # whole identifiers stay as written; words (and identifier pieces) are stemmed
                whole = word == part and (len(subs) > 1 or not word.islower())
                tokens.append(w if whole or len(w) < 4 or not w.isalpha() else stem(w))
                emitted = True
        if not emitted and len(lower) > 0 and lower not in STOPWORDS:
            tokens.append(lower)
    return tuple(tokens)


def identifiers(text: str) -> list[str]:
    """Identifier-like names in a query (``make_tiled_copy``, ``tl.dot``, ``.reqntid``)."""
    names: list[str] = []
    for match in _IDENT.finditer(text):
        raw = match.group(0)
        if "_" in raw or "." in raw or "::" in raw or any(c.isupper() for c in raw[1:]):
            names.append(raw.replace("::", "."))
    return names
