"""Query text: what a query is asking for, read from its wording before any ranking.

An error message pasted as the user saw it carries wrapping that no source line holds: an
exception type in front (``TypeError: ``, ``DSLRuntimeError: ``), Triton's ``CompilationError:
at 26:16: AssertionError('...')``, nvcc's ``kernel.cu(84): error: static assertion failed
with "..."``, quotes. ``error_message`` peels that off and returns the message the source
raises (with runtime values still in it: ``raises`` treats those as wildcards). Example-seeking
queries ("an example of grouped GEMM on Blackwell") are recognised by ``wants_example``.
"""

from __future__ import annotations

import re

from . import errortext

_ERROR_WORD = re.compile(r"(?:Error|Exception|Warning)\b|\berror\b|static assertion", re.I)

_EXAMPLE = re.compile(
    r"\b(?:examples?|tutorials?|samples?|demos?|sample code|example kernel)\b", re.I
)


def error_message(query: str) -> str | None:
    """The message an error-like query quotes, its wrapping peeled off; None when the
    query does not read as a pasted error. ``errortext`` reads every form people paste
    (tracebacks, compiler diagnostics with locations and notes, wrapped lines)."""
    return errortext.message(query)


def looks_like_error(query: str) -> bool:
    """A pasted error message (see ``error_message``), or a sentence naming an error type."""
    return error_message(query) is not None


def wants_example(query: str) -> bool:
    """The query asks for an example, tutorial or sample (not for a definition)."""
    return _EXAMPLE.search(query) is not None and not _ERROR_WORD.search(query)


_QUESTION = re.compile(
    r"(?:^|[.;:!?]\s+|\n)\s*(?:how|what|why|when|where|which|is there|are there|can i|can we"
    r"|should i|do i|does|is it)\b|\?\s*$",
    re.I,
)


def asks_how(query: str) -> bool:
    """A question in words (how / what / why ..., or a question mark at its end) rather
    than a name, an error or a fragment of code: the tutorial, guide or docs section that
    teaches the concept answers it as well as the API source that implements it."""
    if looks_like_error(query) or len(query.split()) < 4:
        return False
    return _QUESTION.search(query) is not None


def plain_words(query: str) -> bool:
    """The query names no identifier (``make_tiled_copy``, ``tl.dot``)."""
    from .tokenize import identifiers

    return not identifiers(query)


_SENTENCE_END = re.compile(r"(?<=[.?!;])\s+|\n+|\s+-\s+")
SENTENCE_MIN_WORDS = 4


def sentences(query: str, min_query_words: int = 25) -> list[str]:
    """The sentences of a long question in the asker's words (their setting, what they
    tried, what they ask), each of at least ``SENTENCE_MIN_WORDS`` words; [] for a short
    query. Each part can be searched on its own: a whole paragraph's words blur both a
    BM25 ranking and a mean of word vectors, and the part that asks is often one line."""
    if len(query.split()) < min_query_words:
        return []
    parts = [p.strip() for p in _SENTENCE_END.split(query) if p and p.strip()]
    parts = [p for p in parts if len(p.split()) >= SENTENCE_MIN_WORDS]
    return parts if len(parts) >= 2 else []


_SEEKS_FILE = re.compile(
    r"\b(?:examples?|samples?|demos?|sample code|implementations?|looking for)\b", re.I
)


def seeks_file(query: str) -> bool:
    """The query asks for a whole file to start from (an example, a sample, an
    implementation of something), not for the passage that explains a point; a mention
    of a tutorial alone ("in the matmul tutorial, why ...") is a question about it."""
    return _SEEKS_FILE.search(query) is not None and not _ERROR_WORD.search(query)


_CODE_NAME = re.compile(r"_|::|^\.|[A-Za-z_]\.[A-Za-z_]")


def names_code(query: str) -> bool:
    """The query spells a name the way code does: with an underscore, ``::``, a dot
    between names or in front of one (``make_tiled_copy``, ``cute.compile``,
    ``.reqntid``). Product and concept names (``DeepSeek``, ``GEMM``, ``CuTeDSL``,
    ``V3.2``) do not count: a question naming only those asks about a topic, not about
    a particular piece of code."""
    from .tokenize import identifiers

    return any(_CODE_NAME.search(name) for name in identifiers(query))
