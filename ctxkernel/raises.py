"""Raise sites: which chunk raises the error message a user pasted.

A site is a statement of a chunk that holds string literals: ``raise ValueError(f"Got
{a} and {b}")``, ``assert x, "..."``, ``static_assert(c, "...")``, ``throw
std::runtime_error("...")``, or a message built before it is raised. Its literals become
a pattern in which format fields (``{lhs.dtype}``, ``%s``, ``{}``) and the code between
concatenated pieces are wildcards, so ``Got fp16 and fp32`` matches ``f"Got {lhs.dtype}
and {rhs.dtype}"``. ``match`` scores a chunk by its best site: the share of the message
its literal text accounts for, higher when the statement raises, asserts or throws than
when it merely holds the words.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

_STRING = re.compile(
    r"""(?P<prefix>\b[rRbBfFuU]{1,2})?(?P<q>\"\"\"|'''|"|')(?P<body>(?:\\.|(?!(?P=q)).)*?)(?P=q)""",
    re.S,
)
_FIELD = re.compile(r"\{[^{}]*\}|%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrifgexXuc]")
_RAISING = re.compile(
    r"\b(?:raise|assert|static_assert|throw|CUTE_STATIC_ASSERT(?:_V)?|CUTE_INVALID_CONTROL_PATH"
    r"|CUTLASS_ASSERT|TORCH_CHECK|report_fatal_error|emitError|emitOpError|error|fail)\b"
)
_WORD = re.compile(r"[A-Za-z0-9]+")
WILD = "\x00"
MAX_SITE_LINES = 12
RAISING_WEIGHT = 1.0
HOLDING_WEIGHT = 0.8  # a literal outside a raise (a message built first, a log line)
KEYS = 6  # message words whose lines are read for sites
# a site's words the message lacks count against it only partly: a user may paste the
# first sentence of a longer message
PRECISION_FLOOR = 0.4
MIN_SHARE = 0.35  # of the message's words a site's literals must account for
# a site's literal words after the last one the message matches count this much against
# it: the message was cut off, or the user pasted its first sentence
TAIL_WEIGHT = 0.25
TAIL_MIN_RECALL = 0.8  # ... only for a message the site spells this much of
# message words in a WILD's place count this much against a site (a runtime value: a
# shape, a dtype, a repr of many words); a little above none, so that of two sites a
# message fits, the one that spells more of it leads
FILLED_WEIGHT = 0.9
HELD_SHARE = 0.35  # of the message's plain words a chunk's text must hold to be read for sites
MAX_ALIGN_CELLS = 20_000  # literal x message words aligned to find the filled ones


@dataclass(frozen=True)
class Site:
    line: int  # offset in the chunk, 0-based
    pattern: tuple[str, ...]  # literal words and WILD markers, in order
    raising: bool


def key_words(words: list[str]) -> list[str]:
    """The words whose lines are read for sites: the longest words without digits (a
    runtime value, a shape or a dtype, is neither in the source nor a good key)."""
    plain = [w for w in words if not any(c.isdigit() for c in w)] or list(words)
    return sorted(plain, key=len, reverse=True)[:KEYS]


def sites(text: str, words: list[str] | None = None, keys: list[str] | None = None) -> list[Site]:
    """The literal-holding statements of ``text``, each with its word pattern; with
    ``words``, only the statements around lines that hold one of them (and at least two
    of them in all), which is most of the speed of a search for a pasted error.
    ``keys`` is ``key_words(words)`` when the caller has it already."""
    lines = text.splitlines()
    if words is None:
        starts: list[int] | None = None
    else:
        if keys is None:
            keys = key_words(words)
        held = [
            i
            for i, line in enumerate(lines)
            if ('"' in line or "'" in line) and _holds_any(line.lower(), keys)
        ]
        # back up to the line that opens the statement: ``raise ValueError(`` above
        starts = []
        for i in held:
            j = i
            while j > 0 and i - j < 3 and lines[j - 1].rstrip().endswith(("(", ",", "+", "\\")):
                j -= 1
            starts.append(j)
    out: list[Site] = []
    i = 0
    todo = iter(sorted(set(starts))) if starts is not None else None
    while True:
        if todo is not None:
            nxt = next(todo, None)
            if nxt is None:
                break
            if nxt < i:
                continue  # inside the statement read last
            i = nxt
        elif i >= len(lines):
            break
        line = lines[i]
        if todo is None and '"' not in line and "'" not in line:
            # ``raise ValueError(`` with its message on the lines below
            tail = line.rstrip()
            if not tail.endswith(("(", ",")) or _RAISING.search(line) is None:
                i += 1
                continue
        # a statement runs on while its brackets are open (a raise over several lines)
        j, depth = i, 0
        stmt: list[str] = []
        while j < len(lines) and j - i < MAX_SITE_LINES:
            stmt.append(lines[j])
            depth += _depth(lines[j])
            j += 1
            if depth <= 0 and not lines[j - 1].rstrip().endswith("\\"):
                break
        statement = "\n".join(stmt)
        if words is not None:
            low = statement.lower()
            if sum(1 for w in words if w in low) < 2:
                i = j
                continue
        pattern = _pattern(statement)
        if any(p != WILD for p in pattern):
            out.append(Site(i, pattern, _RAISING.search(statement) is not None))
        i = j
    return out


def _holds_any(low: str, keys: list[str]) -> bool:
    return any(k in low for k in keys)


def _depth(line: str) -> int:
    if "(" not in line and ")" not in line and "[" not in line and "]" not in line:
        return 0
    code = line
    if '"' in line or "'" in line:
        code = _STRING.sub('""', line)
    code = code.split("#", 1)[0].split("//", 1)[0]
    return code.count("(") + code.count("[") - code.count(")") - code.count("]")


def _pattern(statement: str) -> tuple[str, ...]:
    """Words of the statement's string literals; WILD for a format field and for code
    between two literals (``"a " + str(x) + " b"``), nothing between adjacent ones."""
    out: list[str] = []
    last_end = -1
    for m in _STRING.finditer(statement):
        if last_end >= 0 and statement[last_end : m.start()].strip():
            out.append(WILD)
        body = m.group("body")
        formatted = bool(m.group("prefix") and "f" in m.group("prefix").lower())
        if formatted or "{" in body or "%" in body:
            body = _FIELD.sub(f" {WILD} ", body)
        for part in body.split(WILD):
            out.extend(w.lower() for w in _WORD.findall(part))
            out.append(WILD)
        out.pop()
        last_end = m.end()
    return tuple(out)


def message_words(message: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(message)]


def site_share(pattern: tuple[str, ...], words: list[str]) -> float:
    """How much of the message ``words`` the site's literal words account for, in order:
    the longest in-order match of the literal words, as a share of the message words a
    format field did not fill (a run of words in a WILD's place is a runtime value: a
    shape, a dtype, a repr), discounted by the literal words left unmatched (those after
    the last matched one only partly where the site spells nearly all of the message: it
    was pasted cut off, or its first sentence)."""
    literal = [p for p in pattern if p != WILD]
    if not literal or not words:
        return 0.0
    n, m = len(literal), len(words)
    common, last = _lcs_end(literal, words)
    if not common:
        return 0.0
    recall = common / m
    wild = WILD in pattern
    if wild:
        # values the site leaves to wildcards account for message words it does not spell
        filled = min(_filled(pattern, words), m - common)
        recall = max(recall, common / max(1, m - FILLED_WEIGHT * filled))
        if common == n:
            recall = max(recall, min(1.0, common / max(1, m - _value_words(words))))
    # a message the site spells nearly all of, ending before the site's words do, was
    # cut off or is the first sentence of it (not so a message it spells a little of)
    tail = n - 1 - last if recall >= TAIL_MIN_RECALL else 0
    precision = common / (n - tail + TAIL_WEIGHT * tail)
    return min(1.0, recall) * (PRECISION_FLOOR + (1 - PRECISION_FLOOR) * precision)


def _lcs_end(a: list[str], b: list[str]) -> tuple[int, int]:
    """(the longest common subsequence's length, the index in ``a`` of the last item it
    needs: the shortest prefix of ``a`` with the whole length), bit-parallel like
    ``lcs_length``."""
    masks: dict[str, int] = {}
    for j, w in enumerate(b):
        masks[w] = masks.get(w, 0) | (1 << j)
    full = (1 << len(b)) - 1
    v = full
    length, last = 0, -1
    for i, x in enumerate(a):
        mask = masks.get(x, 0)
        if not mask:
            continue
        u = v & mask
        v = ((v + u) | (v - u)) & full
        now = len(b) - bin(v).count("1")
        if now > length:
            length, last = now, i
    return length, last


def _filled(pattern: tuple[str, ...], words: list[str]) -> int:
    """The message words that stand where the site has a WILD, in a longest in-order
    match of its literal words: the words between two neighbouring literal words, both
    matched, with a WILD between them in the pattern, those before the first literal
    word, matched, where the pattern opens with one, and those after the last matched
    one where a WILD follows it (the pattern's end, or a message cut off in a value)."""
    literal: list[str] = []
    wild_before: list[bool] = []  # a WILD between the previous literal word and this one
    pending = False
    for p in pattern:
        if p == WILD:
            pending = True
        else:
            literal.append(p)
            wild_before.append(pending)
            pending = False
    wild_at_end = pending
    n, m = len(literal), len(words)
    if n * m > MAX_ALIGN_CELLS:
        return 0
    # suffix table: best[i][j] = LCS of literal[i:] and words[j:]
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        row, below = best[i], best[i + 1]
        x = literal[i]
        for j in range(m - 1, -1, -1):
            if x == words[j]:
                row[j] = below[j + 1] + 1
            else:
                row[j] = below[j] if below[j] >= row[j + 1] else row[j + 1]
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < n and j < m:
        if literal[i] == words[j] and best[i][j] == best[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i += 1
            j += 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    if not pairs:
        return 0
    # only a WILD whose literal neighbours both matched (or that opens or closes the
    # pattern next to a matched word) stands for the words between: one beside a literal
    # word the message lacks would let any site absorb whatever it does not spell
    filled = 0
    (i0, j0), (il, jl) = pairs[0], pairs[-1]
    if i0 == 0 and wild_before[0]:
        filled += j0
    if (il == n - 1 and wild_at_end) or (il < n - 1 and wild_before[il + 1]):
        filled += m - 1 - jl  # a message cut off inside a value ends with part of it
    for (a, ja), (b, jb) in itertools.pairwise(pairs):
        if b == a + 1 and wild_before[b]:
            filled += jb - ja - 1
    return filled


def lcs_length(a: list[str], b: list[str]) -> int:
    """The length of the longest common subsequence of ``a`` and ``b``, bit-parallel
    (Crochemore, Iliopoulos, Pinzon and Reid 2001): one big-integer step per item of
    ``a`` instead of ``len(b)`` steps of the dynamic programme, the same length."""
    masks: dict[str, int] = {}
    for j, w in enumerate(b):
        masks[w] = masks.get(w, 0) | (1 << j)
    full = (1 << len(b)) - 1
    v = full
    for x in a:
        u = v & masks.get(x, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - bin(v).count("1")


def _value_words(words: list[str]) -> int:
    return sum(1 for w in words if w.isdigit() or (any(c.isdigit() for c in w) and len(w) <= 6))


@dataclass(frozen=True)
class Message:
    """A message's words, as ``match`` compares them: computed once per search, not once
    per pooled chunk."""

    words: list[str]
    vocabulary: frozenset[str]
    content: list[str]  # the words worth looking for: longer than 2, not numbers
    plain: list[str]  # content words without digits (runtime values rarely are in source)
    keys: list[str]  # ``key_words(content)``: whose lines ``sites`` reads


def prepare(message: str) -> Message:
    words = message_words(message)
    vocabulary = frozenset(words)
    # in the message's order, not the set's: the key words are the longest, and among
    # words of one length a set's order changed with the process's hash seed
    content = list(dict.fromkeys(w for w in words if len(w) > 2 and not w.isdigit()))
    plain = [w for w in content if not any(c.isdigit() for c in w)] or content
    return Message(words, vocabulary, content, plain, key_words(content))


def match(text: str, message: str | Message) -> tuple[float, int]:
    """(score, line offset) of the chunk ``text``'s best site for ``message``; score 0
    when no site accounts for enough of it."""
    prepared = message if isinstance(message, Message) else prepare(message)
    words, vocabulary, content = prepared.words, prepared.vocabulary, prepared.content
    if len(words) < 2:
        return 0.0, -1
    # most pooled chunks share a few words with the message, not a good part of its text
    # (a part only: runtime values of many words, a repr or a class name, are in no source)
    low = text.lower()
    plain = prepared.plain
    if sum(1 for w in plain if w in low) < max(2, HELD_SHARE * len(plain)):
        return 0.0, -1
    best, where = 0.0, -1
    for site in sites(text, content, prepared.keys):
        literal = {p for p in site.pattern if p != WILD}
        common = len(literal & vocabulary)
        if common < 2 or common < 0.5 * MIN_SHARE * len(vocabulary):
            continue  # cheap before the in-order match
        share = site_share(site.pattern, words)
        if share < MIN_SHARE:
            continue
        score = share * (RAISING_WEIGHT if site.raising else HOLDING_WEIGHT)
        if score > best:
            best, where = score, site.line
    return best, where
