"""Pasted error text: the message a source raises, read out of whatever form a user pasted.

People paste an error as their terminal printed it, and no source line holds that form:

- the bare message, or the message with runtime values where the source has format
  fields (``raises`` reads those fields as wildcards, so the values may stay);
- a whole Python traceback: someone else's paths and line numbers, their own frames and
  code lines, Triton's ``CompilationError: at 3:24:`` with the kernel's source and a
  caret, then the exception line (its message may run on over the next lines);
- compiler diagnostics: ``kernel.cu(84): error: ...``, ``foo.py:12:3: error: ...``,
  MLIR's ``loc("/path/kernel.py":258:0): error: ...`` with ``note:`` lines after it,
  ``ptxas /tmp/x.ptx, line 45; error   : ...`` and its ``ptxas fatal`` trailer,
  ``Assertion `cond' failed``, CuTeDSL's ``error[CODE]: ...``;
- a message cut off, or wrapped over several lines by a terminal or an issue form;
- any of these inside a sentence of the user's own words.

``messages`` returns the messages such a text quotes, the most telling first: a
traceback's last exception (the frames before it are where it passed), a compiler's
first error (later ones and the fatal trailer follow from it). ``message`` is the first.
Neither searches anything: they turn text into what the index's raise sites match.
"""

from __future__ import annotations

import re

# an exception or diagnostic name in front of a message: ``ValueError:``,
# ``triton.compiler.errors.CompilationError:``, ``error[INTERNAL]:``, ``fatal error:``
_TYPE_PREFIX = re.compile(
    r"^\s*(?:[A-Za-z_][\w.]*\.)?(?:[A-Z]\w*(?:Error|Exception|Warning|Failure|Interrupt)"
    r"|error(?:\[\w+\])?|fatal error|warning|Error|ERROR|assert(?:ion)? failed"
    r"|ptxas(?:\s+(?:error|fatal|warning))?|nvcc (?:error|fatal)|LLVM ERROR|Check failed|what\(\))"
    r"\s*:\s*"
)
# a location in front: ``kernel.cu(84): ``, ``/a/b.py:12:3: ``, ``at 26:16: ``,
# ``loc("/a/b.py":258:0): ``, ``<unknown>:0: ``, ``ptxas /tmp/x.ptx, line 45; ``
_LOCATION = re.compile(
    r"^\s*(?:[\w./\\~+-]+\(\d+\)|[\w./\\~+-]+\.\w+:\d+(?::\d+)?|at \d+:\d+|<[\w -]+>:\d+(?::\d+)?"
    r"|loc\((?:[^()]|\([^()]*\))*\))\s*:\s*"
    r"|^\s*ptxas\s+[^\s,;]+,\s*line\s+\d+\s*;\s*"
)
_STATIC_ASSERT = re.compile(r"^\s*static assertion failed(?: with)?\s*:?\s*", re.IGNORECASE)
# C's assert: ``Assertion `op.getAxis() < 3' failed.``
_C_ASSERT = re.compile(r"Assertion\s+[`'\"](.+?)['\"]\s+failed\.?", re.S)
# ``AssertionError('...')`` / ``ValueError("...")`` around the message
_CALL_WRAP = re.compile(
    r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Warning)\(\s*(['\"])(.*)\1\s*\)\s*$", re.S
)
_QUOTED = re.compile(r"^\s*(['\"`])((?:(?!\1).)*)\1\s*$", re.S)
# inside a sentence: ``... fails too with error: 'tt.atomic_cas' op ...``
_INLINE = re.compile(
    r"(?:^|[\s(:])(?:[\w.]*[A-Z]\w*(?:Error|Exception)|error(?:\[\w+\])?)\s*:\s+(?=\S)"
)

# lines that are where an error passed, not what it says
_FRAME = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|File \".*\", line \d+|During handling of"
    r"|The above exception was|\^+\s*$|~+\^*~*\s*$|\.\.\.\s*$|\[Previous line repeated"
    r"|detected during|instantiation of|In file included from|#\d+ 0x)"
)
_NOTE = re.compile(
    r"^\s*(?:\S+:\s*)?(?:note|remark|info)\s*:|^\s*(?:loc\(.*\)\s*:\s*)?note\s*:", re.I
)
# a wrapper whose own message is a location, the real message comes later
_WRAPPER = re.compile(r"CompilationError\s*:\s*at \d+:\d+\s*:")
# trailers that follow from an earlier error and say nothing of it
_TRAILER = re.compile(
    r"(?:aborted due to errors|Aborted \(core dumped\)|\d+ errors? (?:generated|detected)|compilation terminated"
    r"|Ptx assembly aborted|failed to (?:compile|run) (?:the )?(?:ptx|ptxas)\b)",
    re.I,
)
# a line that stops mid-sentence: on a word, a comma or a hyphen
_OPEN_END = re.compile(r"[\w,-]\s*$")
# the user's own question after the message on its line: ``... - what do I use?``
_QUESTION = re.compile(
    r"(?:\s+-+\s+|(?<=[.!?])\s+|\s+)(?=(?:what|how|why|is|are|can|does|do|should|where|which|so)\b[^\n]*\?\s*$)",
    re.I,
)
WRAP_WIDTH = 50  # a line at least this long that stops mid-sentence was wrapped
MAX_JOIN = 8  # lines a message may run on over
MIN_CHARS = 6


def message(text: str) -> str | None:
    """The message a pasted error quotes (see the module docstring), or None when the
    text does not read as a pasted error."""
    found = messages(text)
    return found[0] if found else None


def messages(text: str) -> list[str]:
    """Every message the text quotes, the most telling first, without repeats."""
    lines = text.strip().splitlines()
    if not lines:
        return []
    whole = _peeled(" ".join(text.split()))
    if len(lines) == 1:
        single = whole or _c_assert(text) or _inline(text)
        return [single] if single else []
    # (line index, message) of each line that reads as an error
    found: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if _FRAME.match(line) or _NOTE.match(line) or _TRAILER.search(line):
            continue
        if _WRAPPER.search(line):
            continue  # CompilationError: at 3:24:def kernel(...) - code follows, not the message
        got = _peeled(line) or _c_assert(line)
        if got is None:
            continue
        found.append((i, _joined(got, lines, i)))
    traceback = any(_FRAME.match(line) for line in lines)
    if len(found) == 1 and found[0][0] == 0 and not traceback:
        # one message from the first line on: all of it up to its notes (a message of
        # several lines, unwrapped)
        end = next(
            (
                j
                for j, line in enumerate(lines)
                if j and (_NOTE.match(line) or _TRAILER.search(line))
            ),
            len(lines),
        )
        body = _peeled(" ".join(" ".join(lines[:end]).split()))
        if body:
            found = [(0, _peeled_wrap(body))]
    ordered: list[str] = []
    python = [m for i, m in found if _is_python_exception(lines[i])]
    if traceback and python:
        ordered.append(python[-1])  # a traceback's last exception
    # compiler output: the first error first; a user's sentences around errors: in order
    ordered.extend(m for _, m in found)
    if not ordered and whole:
        ordered.append(whole)
    if not ordered:
        for line in lines:
            got = _c_assert(line) or _inline(line)
            if got:
                ordered.append(got)
    return list(dict.fromkeys(m for m in ordered if len(m) >= MIN_CHARS))


def looks_like_error(text: str) -> bool:
    return bool(messages(text))


def _is_python_exception(line: str) -> bool:
    return (
        re.match(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Warning)\s*[:(]", line) is not None
    )


def _joined(first: str, lines: list[str], i: int) -> str:
    """The message of line ``i`` run on over the lines that continue it: while a quote
    or bracket it opened is still open, or while a long line stops mid-sentence (a
    terminal or an issue form wrapped it)."""
    out = first
    j = i + 1
    while j < len(lines) and j - i <= MAX_JOIN:
        nxt = lines[j].strip()
        if not nxt or _FRAME.match(lines[j]) or _NOTE.match(lines[j]) or _TRAILER.search(nxt):
            break
        if _peeled(nxt) is not None or _LOCATION.match(nxt):
            break
        prev = lines[j - 1].rstrip()
        open_quote = _unbalanced(out)
        wrapped = len(prev) >= WRAP_WIDTH and _OPEN_END.search(prev) is not None
        if not (open_quote or wrapped):
            break
        if not open_quote and nxt.endswith("?"):
            break  # the user's question below the message, not the message wrapped
        out = f"{out} {nxt}"
        j += 1
    peeled = _peeled_wrap(out)
    return peeled


def _unbalanced(text: str) -> bool:
    if text.count("(") > text.count(")") or text.count("[") > text.count("]"):
        return True
    # an opening quote of a wrapped ``Error('...`` whose closing quote is on a later line
    return bool(re.match(r"^\s*['\"]", text)) and not re.search(r"['\"]\s*\)?\s*$", text)


def _peeled_wrap(text: str) -> str:
    m = _CALL_WRAP.match(text)
    if m:
        return m.group(2).strip()
    return text.strip()


def _c_assert(text: str) -> str | None:
    m = _C_ASSERT.search(text)
    return m.group(1).strip() if m else None


def _inline(text: str) -> str | None:
    m = _INLINE.search(text)
    if m is None:
        return None
    rest = text[m.end() :].strip()
    # the message runs to the end of the sentence the user wrapped it in
    rest = re.split(r"(?<=[.!?])\s+(?=[A-Z]|how\b|what\b|why\b|is\b|can\b)", rest)[0]
    rest = _peeled(rest) or rest
    if len(rest.split()) < 3:
        return None
    return _peeled_wrap(rest)


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
    if not peeled or len(text.strip()) < MIN_CHARS:
        return None
    cut = _QUESTION.search(text)
    if cut and cut.start() >= MIN_CHARS:
        text = text[: cut.start()]
    return text.strip()


_ASKING = re.compile(
    r"^\s*(?:how|what|why|where|which|when|who|is|are|can|could|does|do|did|should|would"
    r"|will|any|example|examples|show|find|explain|tutorial|guide|i|i'm|my|we|please)\b",
    re.I,
)
BARE_MIN_WORDS = 3
BARE_MAX_WORDS = 60


def maybe_bare(text: str) -> str | None:
    """A text that may be a bare message pasted without its type or location (``cannot
    convert None of type <class 'NoneType'> to tensor``): one line, no question, not
    opening like a question or a request. The caller must ask more of its match than of
    a message that names its error: a plain phrase can read like this too."""
    line = " ".join(text.split())
    if "\n" in text.strip() or "?" in line or _ASKING.match(line):
        return None
    words = line.split()
    if not BARE_MIN_WORDS <= len(words) <= BARE_MAX_WORDS:
        return None
    return line


MAX_BARE_LINES = 4  # lines of a question read as bare messages


def bare_candidates(text: str) -> list[str]:
    """The texts that may be a bare message (``maybe_bare``): the whole text when it is
    one line, else each line of it that may be one (a message pasted on a line of its own
    between the user's sentences: ``... fails with`` / the message / ``why?``), at most
    ``MAX_BARE_LINES`` of them. The caller asks as much of each as of one bare text."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) <= 1:
        one = maybe_bare(text)
        return [one] if one else []
    found = [got for line in lines if (got := maybe_bare(line))]
    return found[:MAX_BARE_LINES]


# a name spelled the way code spells it: ``shape_div``, ``cute::make_layout``, ``tl.dot_scaled``
_CODE_NAME = re.compile(r"(?<![\w.:])(?:[A-Za-z_]\w*(?:::|\.))*([A-Za-z_]\w*)(?!\w)")


def code_names(message: str) -> list[str]:
    """The names of code a message spells (``Static shape_div failure`` -> ``shape_div``):
    snake_case names, the last part of a dotted or qualified one (where the definition
    lives under its own name). Plain words (``size``, ``tensor``: one of them names too
    many things) and values (``sm_120``, ``fp8_e4m3``) are left out."""
    names: list[str] = []
    for m in _CODE_NAME.finditer(message):
        name = m.group(1)
        parts = [p for p in name.split("_") if p]
        if len(parts) < 2 or any(p.isdigit() or re.search(r"\d", p) for p in parts):
            continue
        if len(name) >= 5 and name not in names:
            names.append(name)
    return names


def own_words(text: str) -> str:
    """The user's own words around a pasted error: the lines that are neither the error
    (its message, frames, carets, notes, trailers) nor code echoed under a frame (an
    indented line). A question asked in words names what the message alone does not (the
    call, the API, the corpus's names for things)."""
    out: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith(("    ", "\t")):
            continue
        if _FRAME.match(line) or _NOTE.match(line) or _TRAILER.search(line):
            continue
        if _WRAPPER.search(line) or _peeled(line) is not None or _C_ASSERT.search(line):
            continue
        m = _INLINE.search(line)
        out.append(line[: m.start()] if m else line)
    return " ".join(" ".join(out).split())


# Messages Python itself writes (no source line of the corpora raises them): the names they
# quote are where an answer lives, the class or function the user's code met. Each pattern
# with how its groups make one name: each on its own, or joined as a dotted path.
_PYTHON_SAYS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"'([\w.]+)' object (?:has no attribute|is not (?:callable|subscriptable|iterable))"
        ),
        "each",
    ),
    (re.compile(r"unsupported operand type\(s\) for [^:]+: '([\w.]+)' and '([\w.]+)'"), "each"),
    (
        re.compile(
            r"([\w.]+)\(\) (?:got an unexpected keyword argument|missing \d+ required"
            r"|takes \d+ positional argument|got multiple values for argument)"
        ),
        "each",
    ),
    (re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"), "module after"),
    (re.compile(r"module '([\w.]+)' has no attribute '(\w+)'"), "joined"),
]
_BUILTIN_TYPES = frozenset(
    {
        "int", "float", "str", "bool", "list", "tuple", "dict", "set", "NoneType", "object",
        "type", "function", "module", "bytes", "method", "builtin_function_or_method",
        "generator", "coroutine", "property",
    }
)  # fmt: skip


def python_names(message: str) -> list[str]:
    """The names a message of Python's own quotes (``'constexpr' object has no attribute
    'to'`` -> ``constexpr``; ``foo() got an unexpected keyword argument`` -> ``foo``;
    ``module 'a.b' has no attribute 'c'`` -> ``a.b.c``), Python's built-in types left out:
    a raise site cannot answer such a message, the definition it names can."""
    names: list[str] = []
    for pattern, how in _PYTHON_SAYS:
        for match in pattern.finditer(message):
            groups = [g for g in match.groups() if g]
            if how == "joined":
                groups = [".".join(groups)]
            elif how == "module after":
                groups = [".".join(reversed(groups))]
            for name in groups:
                if name.split(".")[-1] not in _BUILTIN_TYPES and name not in names:
                    names.append(name)
    return names
