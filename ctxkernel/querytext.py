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

# an exception or diagnostic name in front of a message: ``ValueError:``,
# ``triton.compiler.errors.CompilationError:``, ``error[INTERNAL]:``, ``fatal error:``
_TYPE_PREFIX = re.compile(
    r"^\s*(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*(?:Error|Exception|Warning|Failure|Interrupt)"
    r"|error(?:\[\w+\])?|fatal error|warning|Error|ERROR|assert(?:ion)? failed)\s*:\s*"
)
# a compiler location in front: ``kernel.cu(84): ``, ``foo.py:12:3: ``, ``at 26:16: ``
_LOCATION = re.compile(r"^\s*(?:[\w./-]+\(\d+\)|[\w./-]+\.\w+:\d+(?::\d+)?|at \d+:\d+)\s*:\s*")
_STATIC_ASSERT = re.compile(r"^\s*static assertion failed(?: with)?\s*:?\s*", re.IGNORECASE)
# ``AssertionError('...')`` / ``ValueError("...")`` around the message
_CALL_WRAP = re.compile(r"^\s*[A-Z]\w*(?:Error|Exception|Warning)\(\s*(['\"])(.*)\1\s*\)\s*$", re.S)
_QUOTED = re.compile(r"^\s*(['\"`])(.*)\1\s*$", re.S)
_ERROR_WORD = re.compile(r"(?:Error|Exception|Warning)\b|\berror\b|static assertion", re.I)

_EXAMPLE = re.compile(
    r"\b(?:examples?|tutorials?|samples?|demos?|sample code|example kernel)\b", re.I
)


def error_message(query: str) -> str | None:
    """The message an error-like query quotes, its wrapping peeled off; None when the
    query does not read as a pasted error (no exception type, diagnostic or location in
    front). A whole pasted traceback is read by its last line that names an error: the
    frames before it are where the error passed, not what it says."""
    found = _peeled(query)
    lines = query.strip().splitlines()
    if found is None and len(lines) > 1:
        for line in reversed(lines):
            found = _peeled(line)
            if found is not None:
                break
    return found


def _peeled(query: str) -> str | None:
    text = " ".join(query.split())
    peeled = False
    for _ in range(6):
        before = text
        for pattern in (_LOCATION, _TYPE_PREFIX, _STATIC_ASSERT):
            m = pattern.match(text)
            if m and m.end() < len(text):
                text = text[m.end() :]
                peeled = True
        m = _CALL_WRAP.match(text)
        if m:
            text, peeled = m.group(2), True
        m = _QUOTED.match(text)
        if m and peeled:
            text = m.group(2)
        if text == before:
            break
    if not peeled or len(text.strip()) < 6:
        return None
    return text.strip()


def looks_like_error(query: str) -> bool:
    """A pasted error message (see ``error_message``), or a sentence naming an error type."""
    return error_message(query) is not None


def wants_example(query: str) -> bool:
    """The query asks for an example, tutorial or sample (not for a definition)."""
    return _EXAMPLE.search(query) is not None and not _ERROR_WORD.search(query)
