"""Redaction: secret values this process knows never reach a verdict, feedback or record.

The last line of defence behind the sandbox: whatever a candidate manages to print, the
values of this process's environment variables whose names look like credentials
(``ANTHROPIC_API_KEY``, ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``...) and the values
registered with ``remember`` (the agent's API key, read by its client) are replaced with
``[redacted]`` in verdict documents, feedback, ladder lines and run-record files.

A candidate that read a key need not print it verbatim, so each secret is looked for in
the forms a simple transformation gives: the value itself and reversed; its letters and
digits with any run of other characters between them (``s-k-a-n-t``, ``s k a n t``),
also reversed; its UTF-8 bytes as hex (either case, with ``0x``/``\\x`` or other
separators between digits allowed); as base64, standard or urlsafe, at any of the three
byte alignments inside a longer blob (the characters that depend on the secret alone);
and any stretch of at least ``RUN_MIN`` characters of the secret, or of its reverse, in
order (a key printed in pieces). The spaced-out forms and the stretches are sought only
for a secret of at least ``MIN_VARIETY`` different characters: "0000000000" spaced out is
how a tensor of zeros prints. One regular expression per set of secrets is compiled
once and cached; every repetition in it is possessive, so no text makes it backtrack, and
the stretches are found from fixed anchors with ``str.find``, so a MiB of output costs
tens of milliseconds.

``forget_env(name)`` takes a variable out of this process: its value is remembered (for
redaction, and for ``recall``: a later client of this process still finds the key), its
bytes are overwritten where the C library keeps them -- the original environment block,
which ``/proc/<pid>/environ`` reads, is not changed by ``unsetenv`` or ``os.environ.pop``
-- and then it is unset.
"""

from __future__ import annotations

import base64
import bisect
import ctypes
import functools
import os
import re
import string
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MARK = "[redacted]"
MIN_LENGTH = 8  # shorter values ("1", "true") would redact ordinary text
MIN_VARIETY = 4  # different characters a secret needs before its looser forms are sought
RUN_MIN = 12  # this many characters of a secret in order are the secret, printed in pieces
# Every RUN_MIN-long stretch of a string holds one whole block of this size starting at a
# multiple of it: finding those blocks with str.find finds every stretch.
_ANCHOR = RUN_MIN // 2
_ALNUM = frozenset(string.ascii_letters + string.digits)
# The separator runs are possessive (``*+``): what follows each is a letter or digit that
# they cannot match, so giving characters back could never help, and without it a secret
# with repeated characters next to a long run of separators would backtrack for ever.
_SEP = r"[^0-9A-Za-z]*+"
_HEX_SEP = r"(?:\\x|0x|[^0-9A-Za-z])*+"
_B64_SEP = r"\s*+"  # base64 wrapped at 64 or 76 columns
_B64_CHAR = {"+": r"[+\-]", "-": r"[+\-]", "/": "[/_]", "_": "[/_]"}  # standard or urlsafe
_SECRET_NAME = re.compile(
    r"(API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|_KEY$|^KEY$|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL"
    r"|(^|_)O?AUTH(_|$)|(^|_)PASS(_|$))",
)
_NOT_SECRET_NAME = re.compile(r"(_PATH|_FILE|_DIR|_SOCK|_URL|_HOST|_PORT)$")
_remembered: set[str] = set()
_forgotten: dict[str, str] = {}
_lock = threading.Lock()


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return bool(_SECRET_NAME.search(upper)) and not _NOT_SECRET_NAME.search(upper)


def remember(value: str | None) -> None:
    """Redact ``value`` from now on (a key this process got from somewhere else)."""
    if value and len(value) >= MIN_LENGTH:
        with _lock:
            _remembered.add(value)


def known() -> list[str]:
    """The secret values to redact, longest first (a key containing another key)."""
    values = {v for k, v in os.environ.items() if looks_secret(k) and len(v) >= MIN_LENGTH}
    with _lock:
        values |= _remembered
    return sorted(values, key=len, reverse=True)


def secret_env_names(environ: dict[str, str] | None = None) -> list[str]:
    return [k for k in (os.environ if environ is None else environ) if looks_secret(k)]


def _varied(value: str) -> bool:
    """Whether ``value`` has enough different characters that its spaced-out form and its
    stretches are not ordinary text ("0, 0, 0, 0", "000000000000")."""
    return len(set(value)) >= MIN_VARIETY


def _utf8(value: str) -> bytes:
    """The bytes a process would print ``value`` as; a lone surrogate (a remembered value
    that never came from bytes) is kept rather than failing the redaction."""
    try:
        return value.encode(errors="surrogateescape")
    except UnicodeEncodeError:
        return value.encode(errors="surrogatepass")


def _spaced(chars: str, sep: str) -> str:
    return sep.join(re.escape(c) for c in chars)


def _base64_fragments(raw: bytes) -> list[str]:
    """The base64 characters that depend on ``raw`` alone, for each of the three byte
    offsets at which it can sit inside a longer blob."""
    fragments = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode()
        # character i holds bits [6i, 6i + 6); the secret's bits are [8 offset, 8 end)
        first = -(-8 * offset // 6)
        fragments.append(encoded[first : 8 * (offset + len(raw)) // 6])
    return fragments


def _forms(value: str) -> list[str]:
    """Regular expressions for ``value`` as printed whole, reversed, spaced out, as hex
    and as base64 (the stretches of it are found by ``_Matcher``'s anchors)."""
    if len(value) < MIN_LENGTH:  # a short value passed in: its other forms are common text
        return [re.escape(value)]
    reverse = value[::-1]
    forms = [re.escape(value), re.escape(reverse)]
    letters = "".join(c for c in value if c in _ALNUM)
    # fewer letters and digits than a secret must have would match ordinary words, and
    # a value of one or two repeated characters spaced out is a tensor of zeros printed
    if len(letters) >= MIN_LENGTH and _varied(letters):
        forms += [_spaced(letters, _SEP), _spaced(letters[::-1], _SEP)]
    raw = _utf8(value)
    forms.append("(?i:" + _spaced(raw.hex(), _HEX_SEP) + ")")
    for fragment in _base64_fragments(raw):
        forms.append(_B64_SEP.join(_B64_CHAR.get(c) or re.escape(c) for c in fragment))
    return forms


class _Matcher:
    """Where the forms of a set of secrets occur in a text."""

    def __init__(self, values: tuple[str, ...]) -> None:
        forms: list[str] = []
        # an anchor block -> (the secret or its reverse, the block's offset in it)
        self.anchors: dict[str, list[tuple[str, int]]] = {}
        for value in sorted(set(values), key=len, reverse=True):  # a key holding another key
            forms += _forms(value)
            if len(value) < RUN_MIN or not _varied(value):
                continue
            for owner in (value, value[::-1]):
                for offset in range(0, len(owner) - _ANCHOR + 1, _ANCHOR):
                    block = owner[offset : offset + _ANCHOR]
                    self.anchors.setdefault(block, []).append((owner, offset))
        self.pattern = re.compile("|".join(forms)) if forms else None

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The merged ``(start, end)`` spans to redact, in order."""
        found = _merge(
            [m.span() for m in self.pattern.finditer(text)] if self.pattern is not None else []
        )
        starts = [start for start, _ in found]

        def covered(at: int) -> int:
            """The end of the span holding [at, at + _ANCHOR), or -1."""
            i = bisect.bisect_right(starts, at) - 1
            return found[i][1] if i >= 0 and found[i][1] >= at + _ANCHOR else -1

        hits: list[tuple[int, str]] = []
        for block in self.anchors:
            at = text.find(block)
            while at >= 0:
                end = covered(at)
                if end < 0:
                    hits.append((at, block))
                    end = at + 1
                else:
                    end -= _ANCHOR - 1  # the next block not inside a found span
                at = text.find(block, end)
        runs: list[tuple[int, int]] = []
        reach = -1
        for at, block in sorted(hits):
            if at + _ANCHOR <= reach:  # inside a stretch already found (they start <= at)
                continue
            for owner, offset in self.anchors[block]:
                start, end = _stretch(text, at, owner, offset)
                if end - start >= RUN_MIN:
                    runs.append((start, end))
                    reach = max(reach, end)
        return _merge(found + runs) if runs else found


def _stretch(text: str, at: int, owner: str, offset: int) -> tuple[int, int]:
    """The longest span around ``text[at:at + _ANCHOR]`` that is a stretch of ``owner``
    lined up with ``owner[offset:]``."""
    start, back = at, offset
    while start > 0 and back > 0 and text[start - 1] == owner[back - 1]:
        start -= 1
        back -= 1
    end, ahead = at + _ANCHOR, offset + _ANCHOR
    while end < len(text) and ahead < len(owner) and text[end] == owner[ahead]:
        end += 1
        ahead += 1
    return start, end


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


@functools.lru_cache(maxsize=32)
def _matcher(values: tuple[str, ...]) -> _Matcher:
    return _Matcher(values)


def _values(values: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(known() if values is None else (v for v in values if v))


def redact(text: str, values: Iterable[str] | None = None) -> str:
    """``text`` with every form of every secret (``values``, or those this process knows)
    replaced by ``[redacted]``."""
    secrets = _values(values)
    if not secrets or not text:
        return text
    spans = _matcher(secrets).spans(text)
    if not spans:
        return text
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces += [text[last:start], MARK]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def redact_bytes(data: bytes, values: Iterable[str] | None = None) -> bytes:
    """``redact`` for bytes that need not be UTF-8 (logs, timelines): undecodable bytes
    pass through unchanged."""
    secrets = _values(values)
    if not secrets or not data:
        return data
    text = data.decode(errors="surrogateescape")
    clean = redact(text, secrets)
    return data if clean is text else clean.encode(errors="surrogateescape")


def redact_obj(value: Any, values: list[str] | None = None) -> Any:
    """A JSON-like value with every string (keys too) redacted."""
    values = known() if values is None else values
    if not values:
        return value
    if isinstance(value, str):
        return redact(value, values)
    if isinstance(value, dict):
        return {redact_obj(k, values): redact_obj(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_obj(v, values) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_obj(v, values) for v in value)
    return value


def redact_tree(root: Path) -> list[Path]:
    """Rewrite every file under ``root`` that holds a secret value; returns those files."""
    values = known()
    changed: list[Path] = []
    if not values or not root.is_dir():
        return changed
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        clean = redact_bytes(data, values)
        if clean != data:
            path.write_bytes(clean)
            changed.append(path)
    return changed


def recall(name: str) -> str | None:
    """The variable's value: from the environment, or as it was when ``forget_env`` took it."""
    value = os.environ.get(name)
    if value is not None:
        return value
    with _lock:
        return _forgotten.get(name)


def clear_forgotten() -> None:
    """Drop what ``forget_env`` kept (a test that removes a key means it gone)."""
    with _lock:
        _forgotten.clear()


def forget_env(name: str) -> bool:
    """Remember ``name``'s value for redaction, wipe its bytes, unset it. True if it was set."""
    value = os.environ.get(name)
    if value is None:
        return False
    remember(value)
    with _lock:
        _forgotten[name] = value
    try:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        libc.getenv.argtypes = [ctypes.c_char_p]
        address = libc.getenv(os.fsencode(name))
        if address:
            size = len(ctypes.string_at(address))
            ctypes.memset(address, ord("*"), size)
    except (OSError, AttributeError):
        pass
    os.environ.pop(name, None)
    return True
