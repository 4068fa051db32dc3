"""Boilerplate: the license header at the top of a file, kept out of everything a chunk
is known by.

Most CUTLASS files open with the same copyright block (``Copyright (c) 2017 - 2026 NVIDIA
CORPORATION & AFFILIATES. All rights reserved.``, SPDX lines, the BSD text). In a chunk's
one-line title it says nothing; in the lexical and dense text it makes the first chunk of
hundreds of files look alike and match any query with "license", "NVIDIA" or "rights" in
it. ``license_lines`` finds the block (a leading comment block that names a copyright or
license), ``without_license`` drops it from a text, and ``clean_title`` gives a title that
is the chunk's definition, heading or first meaningful line, never a license line.
"""

from __future__ import annotations

import re

LICENSE_WORDS = re.compile(
    r"copyright|spdx-|license|licence|redistribution|all rights reserved|warrant"
    r"|permission is hereby granted|governed by the terms",
    re.I,
)
# what only a license header says (a section titled "License" is a real heading)
_HEADER_LINE = re.compile(
    r"copyright|spdx-|all rights reserved|redistribution and use|permission is hereby granted"
    r"|licensed under|governed by the terms|without warranty",
    re.I,
)
_LINE_COMMENT = re.compile(r"^\s*(?:#(?!include|define|pragma|if|endif|else|elif|undef)|//|--|;)")
_RULER = re.compile(r"^[\s/*#=\-_~+!<>.]*$")
TITLE_CHARS = 200


def is_license_line(line: str) -> bool:
    """A line only a license header holds (a copyright, an SPDX tag, the licence's text)."""
    return _HEADER_LINE.search(line) is not None


def license_lines(lines: list[str]) -> int:
    """How many lines at the top of ``lines`` are a license header (0 when none): a
    leading comment block (``/* ... */``, ``#``, ``//`` or ``<!-- -->`` lines, after blank
    lines or a shebang) that names a copyright or license in its first lines."""
    i = 0
    n = len(lines)
    while i < n and (not lines[i].strip() or lines[i].startswith("#!")):
        i += 1
    if i >= n:
        return 0
    start = i
    first = lines[i].lstrip()
    if first.startswith(("/*", "<!--")):
        closer = "*/" if first.startswith("/*") else "-->"
        j = i
        while j < n and closer not in (lines[j] if j > i else lines[j][2:]):
            j += 1
        end = min(j + 1, n)
    elif _LINE_COMMENT.match(lines[i]):
        j = i
        while j < n and _LINE_COMMENT.match(lines[j]):
            j += 1
        end = j
    else:
        return 0
    head = lines[start : min(end, start + 8)]
    if not any(LICENSE_WORDS.search(line) for line in head):
        return 0
    while end < n and not lines[end].strip():
        end += 1
    return end


def without_license(text: str) -> str:
    """``text`` without a license header at its top (unchanged when it has none)."""
    if not LICENSE_WORDS.search(text[:2000]):
        return text
    lines = text.splitlines()
    cut = license_lines(lines)
    return "\n".join(lines[cut:]) if cut else text


def first_meaningful_line(text: str) -> str:
    """The first line of ``text`` after any license header that has a word in it and is
    not itself license text; "" when there is none."""
    lines = text.splitlines()
    for line in lines[license_lines(lines) :]:
        if _RULER.match(line) or is_license_line(line):
            continue
        return " ".join(line.split())[:TITLE_CHARS]
    return ""


def clean_title(title: str, text: str, path: str = "") -> str:
    """``title`` unless it is a license line; then the chunk's first meaningful line, or
    the file name when the chunk is all header."""
    if not title or not is_license_line(title):
        return title
    return first_meaningful_line(text) or path.rsplit("/", 1)[-1]
