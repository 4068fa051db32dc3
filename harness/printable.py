"""Text a candidate controls, made safe to print on a terminal.

A candidate's exception message, a problem check's words or a worker's log line reach the
ladder, ``feedback()`` and the run record's ``feedback.txt``. Raw control characters in
them (``ESC``: cursor moves, line erases, ``ESC E``; a carriage return; C1 codes such as
``CSI`` in one character) would let the text redraw what the user's terminal shows above
or after it -- a fake ``[run] ok`` line, a fake ``verdict: PASSED``. ``printable`` renders
every such character visibly instead (``\\x1b``, ``\\r``, ``\\u202e``): C0 and C1 control
characters, DEL and the bidirectional overrides and isolates; a tab is kept, and a
newline where the text is meant to span lines (``newlines=True``). Idempotent: what it
returns holds no character it would escape. ``--json`` output needs none of it (JSON
escapes control characters itself).
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 but tab and newline, DEL, C1; the bidi embeddings, overrides and isolates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_ONE_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\n": "\\n"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, newlines: bool = True) -> str:
    """``text`` with every control character that could move a terminal's cursor, erase
    or rewrite what it shows, written out visibly; newlines kept where ``newlines``."""
    pattern = _UNSAFE if newlines else _UNSAFE_ONE_LINE
    return pattern.sub(_escape, text)
