"""The C++/CUDA chunker: a brace-aware splitter for headers and sources, no parser needed.

A lexer blanks comments, string and character literals (raw strings included) and
preprocessor lines, so the braces, parentheses and semicolons left are the code's own;
``asm volatile("{ wgmma... }")`` and ``#define`` bodies cannot confuse it. Branches of a
``#if`` whose braces do not balance like the first branch (and ``#if 0`` code) are left
out of the count. On that skeleton, top-level declarations become pieces: functions,
classes/structs/unions/enums and brace-initialised variables, each with its
``template <...>`` head and the comment block directly above. ``namespace x {`` and
``extern "C" {`` are transparent (their contents are split, symbols get ``x::``). A long
class is split into a header and its members; a long function at depth-1 statement ends,
else into line windows. Declarations ending in ``;`` (``using``, typedefs, prototypes)
and everything between pieces become glue. The work is linear in the file size and
unbalanced braces are closed at end of file.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from itertools import accumulate

from ._cpp_heads import CLASS_KEY, alias_name, comment_text, head_info
from ._merge import (
    TINY_GLUE_LINES,
    fill_gaps,
    finalize,
    first_line,
    pack,
    part_title,
    tidy_signature,
)
from .base import DEFAULT_MAX_LINES, Piece

_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_NOT_BREAK = re.compile(r"[^\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_NONWS = re.compile(r"\S")
_TOKENS = re.compile(r"[{}();]")
# Every branch starts with one of a few characters, which lets the regex engine skip
# ahead quickly. A directive is matched with the line break before it; the text is lexed
# with a leading "\n" so the first line is no exception. Character literals are short
# so C++14 digit separators (1'000'000) are not mistaken for them; a raw string's
# encoding prefix (u8R"...") is left as code, which is harmless.
_LEX = re.compile(
    r"""
    (?=[\n/"'R])  # a quick filter: no branch can start anywhere else
    (?: (?P<pp>\n[ \t]*\#(?:/\*.*?\*/|//[^\n]*|\\.|[^\n\\/]|/(?![*/]))*)
    | (?P<lc>//(?:\\\n|[^\n])*)
    | (?P<bc>/\*.*?(?:\*/|\Z))
    | (?P<raw>R"(?P<delim>[^()\\\s"]{0,16})\(.*?(?:\)(?P=delim)"|\Z))
    | (?P<str>"(?:\\.|[^"\\\n])*"?)
    | (?P<chr>'(?:\\[^\n]{1,8}?|[^'\\\n])') )
    """,
    re.S | re.X,
)
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w*)(.*)", re.S)
_CONDITION_OPEN = {"if", "ifdef", "ifndef"}
_CONDITION_NEXT = {"elif", "else", "elifdef", "elifndef"}
_MAX_DEPTH = 48  # nesting of namespaces/classes we descend into; deeper is kept whole

_NAMESPACE = re.compile(
    r"^(?:inline\s+)?namespace\b\s*(?:\[\[.*?\]\]\s*)?((?:inline\s+)?[\w:\s]*?)\s*(?:\[\[.*?\]\])?\s*$",
    re.S,
)
_EXTERN = re.compile(r'^extern\s*"C(?:\+\+)?"\s*$')
_ACCESS = re.compile(r"(?:public|private|protected|signals|slots|Q_SLOTS|Q_SIGNALS)\s*:(?!:)")
_FOLDABLE_PP = re.compile(r"\s*#\s*(?:if|ifdef|ifndef|elif|else|endif|pragma\s+once)\b")
_FOLDABLE_CODE = re.compile(
    r'^(?:[{};]\s*)*$|^(?:inline\s+)?namespace\b[^;]*\{?$|^extern\s*"C(?:\+\+)?"\s*\{?$'
    r"|^(?:public|private|protected)\s*:$"
)


def chunk(text: str, path: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Piece]:
    """Cut C++/CUDA source into declaration pieces and glue."""
    if not text.strip():
        return []
    lines = text.splitlines()
    return _Splitter(text, lines, max(1, max_lines)).run()


@dataclass(frozen=True)
class _Decl:
    """One declaration at some scope, as offsets into the text and token indices."""

    start: int  # offset of its first code character
    end: int  # offset just past its ';' or '}'
    head_end: int  # offset of the '{' opening its body, or of its ';'
    open_i: int  # token index of the body's '{', -1 when it has none
    close_i: int  # token index of the matching '}' (len(tokens) when never closed)


class _Lexed:
    """The text with comments, literals and preprocessor lines blanked, and its tokens."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0, *accumulate(len(line) for line in text.splitlines(True))]
        lexable = "\n" + (text.replace("\r\n", " \n").replace("\r", "\n") if "\r" in text else text)
        titles: list[str] = []  # comments and directives blanked, literals kept
        struct: list[str] = []  # literals blanked as well: only the code's own punctuation
        pp_spans: list[tuple[int, int]] = []
        block_spans: list[tuple[int, int]] = []
        directives: list[tuple[int, int, str, str]] = []
        pos = 0
        exotic = _BREAK.search(text.replace("\r", "").replace("\n", "")) is not None
        for m in _LEX.finditer(lexable):
            a, b = m.start() - 1, m.end() - 1  # offsets into text
            kind = m.lastgroup
            if kind == "pp":
                a += 1  # the line break before the directive is not part of it
            elif kind == "delim":
                kind = "raw"
            between = text[pos:a]
            titles.append(between)
            struct.append(between)
            span = text[a:b]
            if "\n" in span or "\r" in span or (exotic and _BREAK.search(span)):
                blank = _NOT_BREAK.sub(" ", span)
            else:
                blank = " " * (b - a)
            if kind in ("str", "raw", "chr"):
                titles.append(span)
                struct.append('"' + blank[1:-1] + '"' if b - a >= 2 else '"')
            else:
                titles.append(blank)
                struct.append(blank)
            if kind == "bc":
                block_spans.append((a, b))
            elif kind == "pp":
                pp_spans.append((a, b))
                d = _DIRECTIVE.match(text, a, b)
                if d is not None:
                    directives.append((a, b, d.group(1), d.group(2)))
            pos = b
        titles.append(text[pos:])
        struct.append(text[pos:])
        self.title_mask = "".join(titles)
        mask = "".join(struct)
        muted = _muted_spans(mask, directives)
        if muted:
            parts: list[str] = []
            pos = 0
            for a, b in muted:
                a = max(a, pos)
                if a < b:
                    parts.append(mask[pos:a])
                    parts.append(_NOT_BREAK.sub(" ", mask[a:b]))
                    pos = b
            parts.append(mask[pos:])
            mask = "".join(parts)
        self.mask = mask
        self.tok_off = [m.start() for m in _TOKENS.finditer(mask)]
        self.tok_ch = [mask[k] for k in self.tok_off]
        self.match = _match_braces(self.tok_ch)
        n = len(self.starts)
        self.code = [False] * (n + 1)
        self.pp = [False] * (n + 1)
        for ln, line in enumerate(mask.splitlines(), 1):
            self.code[ln] = bool(line) and not line.isspace()
        for a, b in pp_spans:
            for ln in range(self.line_of(a), self.line_of(max(a, b - 1)) + 1):
                self.pp[ln] = True
        self.in_block = [False] * (n + 1)  # blank lines inside a /* ... */ comment
        for a, b in block_spans:
            for ln in range(self.line_of(a) + 1, self.line_of(max(a, b - 1))):
                self.in_block[ln] = True

    def line_of(self, off: int) -> int:
        return bisect.bisect_right(self.starts, off)

    def next_code(self, pos: int, end: int | None = None) -> int:
        """Offset of the next code character at or after ``pos``, -1 if none before ``end``."""
        m = _NONWS.search(self.mask, pos, len(self.mask) if end is None else end)
        return -1 if m is None else m.start()


def _match_braces(chars: list[str]) -> list[int]:
    """For each '{' the index of its '}' (len(chars) if never closed); -2 for a stray '}'."""
    match = [-1] * len(chars)
    stack: list[int] = []
    for i, ch in enumerate(chars):
        if ch == "{":
            stack.append(i)
        elif ch == "}":
            if stack:
                j = stack.pop()
                match[j], match[i] = i, j
            else:
                match[i] = -2
    for j in stack:
        match[j] = len(chars)
    return match


def _muted_spans(mask: str, directives: list[tuple[int, int, str, str]]) -> list[tuple[int, int]]:
    """Offsets of ``#if`` branches whose braces must not count.

    ``#if 0`` branches always; and when a branch of a conditional changes the brace
    depth (``#if A`` / ``void f(int a) {`` / ``#else`` / ``void f() {``), all but the
    first live branch: the branches are alternatives, so only one of them may count.
    Conditionals whose branches each balance their braces are kept whole.
    """
    brace_offs: list[int] = []
    prefix = [0]
    for m in re.finditer(r"[{}]", mask):
        brace_offs.append(m.start())
        prefix.append(prefix[-1] + (1 if m.group() == "{" else -1))

    def delta(a: int, b: int) -> int:
        return prefix[bisect.bisect_left(brace_offs, b)] - prefix[bisect.bisect_left(brace_offs, a)]

    muted: list[tuple[int, int]] = []
    stack: list[list[tuple[int, int, bool]]] = []  # per open #if: (start, end, dead) branches
    open_at: list[tuple[int, bool]] = []  # per open #if: current branch start and deadness
    for a, b, name, rest in directives:
        if name in _CONDITION_OPEN:
            stack.append([])
            open_at.append((b, name == "if" and _is_zero(rest)))
        elif name in _CONDITION_NEXT and stack:
            start, dead = open_at[-1]
            stack[-1].append((start, a, dead))
            open_at[-1] = (b, name == "elif" and _is_zero(rest))
        elif name == "endif" and stack:
            start, dead = open_at.pop()
            branches = [*stack.pop(), (start, a, dead)]
            live = [br for br in branches if not br[2]]
            muted.extend((s, e) for s, e, d in branches if d)
            if any(delta(s, e) for s, e, _ in live):
                muted.extend((s, e) for s, e, _ in live[1:])
    return sorted(muted)


def _is_zero(condition: str) -> bool:
    cond = re.sub(r"/\*.*?\*/|//.*", "", condition, flags=re.S).strip()
    return cond in ("0", "false", "(0)")


class _Splitter:
    """Declarations of one file turned into pieces."""

    def __init__(self, text: str, lines: list[str], max_lines: int) -> None:
        self.lx = _Lexed(text)
        self.lines = lines
        self.max_lines = max_lines
        self.n_tok = len(self.lx.tok_off)
        self.floor = 0  # last line of the previous declaration: comments above it are not ours
        self.ends: list[int] = []  # last lines of all declarations: where glue may be cut
        self.aliases: list[tuple[int, str]] = []  # (line, name) of using/typedef aliases

    def run(self) -> list[Piece]:
        lx = self.lx
        decls = self.scan(0, self.n_tok, 0, len(lx.text), False, "", 0)
        pieces: list[Piece] = []
        for decl, prefix in decls:
            self.add(pieces, self.decl_pieces(decl, prefix, 0))
        self.aliases.sort()
        alias_lines = [a[0] for a in self.aliases]

        def glue(s: int, e: int) -> Piece:
            lo, hi = bisect.bisect_left(alias_lines, s), bisect.bisect_right(alias_lines, e)
            names = tuple(dict.fromkeys(name for _, name in self.aliases[lo:hi]))[:32]
            return Piece(s, e, title=first_line(self.lines, s, e), defines=names)

        pieces = fill_gaps(
            self.lines, pieces, self.max_lines, glue, cuts=self.ends, foldable=self.foldable
        )
        return finalize(pieces, self.lines)

    def foldable(self, s: int, e: int) -> bool:
        """A short run of braces, scope heads, conditionals and comments: no glue piece."""
        lx = self.lx
        nonblank = 0
        for ln in range(s, e + 1):
            line = self.lines[ln - 1]
            if not line.strip():
                continue
            nonblank += 1
            if lx.pp[ln]:
                if not _FOLDABLE_PP.match(line):
                    return False
            elif lx.code[ln]:
                code = " ".join(
                    lx.title_mask[lx.starts[ln - 1] : lx.starts[ln - 1] + len(line)].split()
                )
                if not _FOLDABLE_CODE.match(code):
                    return False
        return nonblank <= TINY_GLUE_LINES

    # -- scanning -------------------------------------------------------------------------

    def scan(
        self, i: int, i_end: int, pos: int, pos_end: int, in_class: bool, prefix: str, depth: int
    ) -> list[tuple[_Decl, str]]:
        """Declarations in tokens ``i..i_end`` / offsets ``pos..pos_end``, namespaces flattened."""
        lx = self.lx
        out: list[tuple[_Decl, str]] = []
        while True:
            start = lx.next_code(pos, pos_end)
            if start < 0:
                break
            if lx.mask[start] == "}":  # a stray closing brace: nothing opened it here
                pos = start + 1
                continue
            if in_class:
                m = _ACCESS.match(lx.mask, start, pos_end)
                if m is not None:
                    pos = m.end()
                    continue
            while i < i_end and lx.tok_off[i] < start:
                i += 1
            decl, i = self.one_decl(start, i, i_end, pos_end)
            pos = decl.end
            ns = self.transparent(decl) if depth < _MAX_DEPTH and not in_class else None
            if ns is None:
                out.append((decl, prefix))
                continue
            inner_end = lx.tok_off[decl.close_i] if decl.close_i < self.n_tok else len(lx.text)
            inner = prefix + ns + "::" if ns else prefix
            out.extend(
                self.scan(
                    decl.open_i + 1,
                    min(decl.close_i, i_end),
                    lx.tok_off[decl.open_i] + 1,
                    min(inner_end, pos_end),
                    False,
                    inner,
                    depth + 1,
                )
            )
        return out

    def one_decl(self, start: int, i: int, i_end: int, pos_end: int) -> tuple[_Decl, int]:
        """The declaration starting at ``start``; returns it and the next token index."""
        lx = self.lx
        paren = 0
        while i < i_end:
            ch, off = lx.tok_ch[i], lx.tok_off[i]
            if ch == "(":
                paren += 1
            elif ch == ")":
                paren = max(0, paren - 1)
            elif ch == ";" and paren == 0:
                return _Decl(start, off + 1, off, -1, -1), i + 1
            elif ch == "{":
                j = lx.match[i]
                if paren > 0 or self.member_init(start, off):
                    if j >= i_end:
                        break
                    i = j + 1
                    continue
                if j >= i_end:  # never closed inside this scope: runs to its end
                    return _Decl(start, self.code_end(start, pos_end), off, i, j), i_end
                end = lx.tok_off[j] + 1
                k = j + 1
                nxt = lx.next_code(end, pos_end)
                if nxt >= 0 and lx.mask[nxt] == ";":
                    end = nxt + 1
                    k = bisect.bisect_right(lx.tok_off, nxt, k, i_end)
                elif nxt >= 0 and self.declarator_follows(start, off, end, nxt):
                    end, k = self.to_semicolon(k, i_end, end)
                return _Decl(start, end, off, i, j), k
            i += 1
        return _Decl(start, self.code_end(start, pos_end), pos_end, -1, -1), i_end

    def code_end(self, start: int, pos_end: int) -> int:
        """Offset just past the last code character before ``pos_end``."""
        tail = self.lx.mask[start:pos_end].rstrip()
        return start + max(len(tail), 1)

    def member_init(self, start: int, brace: int) -> bool:
        """Whether the '{' at ``brace`` initialises a member in a constructor's init list."""
        head = self.lx.mask[start:brace].rstrip()
        if not head or not (head[-1].isalnum() or head[-1] in "_>"):
            return False
        return (
            re.search(r"\)\s*(?:const\s*|noexcept\s*(?:\([^()]*\))?\s*)*:(?!:)", head) is not None
        )

    def declarator_follows(self, start: int, brace: int, end: int, nxt: int) -> bool:
        """``struct S { ... } s;``: a name on the line of the closing brace continues it."""
        lx = self.lx
        if lx.line_of(nxt) != lx.line_of(end - 1):
            return False
        if not (lx.mask[nxt].isalpha() or lx.mask[nxt] in "_*&"):
            return False
        head = lx.mask[start:brace]
        return bool(CLASS_KEY.search(head)) or "=" in head or head.lstrip().startswith("typedef")

    def to_semicolon(self, k: int, i_end: int, end: int) -> tuple[int, int]:
        lx = self.lx
        paren = 0
        while k < i_end:
            ch = lx.tok_ch[k]
            if ch == "(":
                paren += 1
            elif ch == ")":
                paren = max(0, paren - 1)
            elif ch == "{" and lx.match[k] < i_end:
                k = lx.match[k]
            elif ch == ";" and paren == 0:
                return lx.tok_off[k] + 1, k + 1
            k += 1
        return end, k

    def transparent(self, decl: _Decl) -> str | None:
        """The namespace name ('' if anonymous or ``extern "C"``) if the decl is a scope."""
        if decl.open_i < 0:
            return None
        head = " ".join(self.lx.title_mask[decl.start : decl.head_end].split())
        if _EXTERN.match(head):
            return ""
        m = _NAMESPACE.match(head)
        if m is None:
            return None
        return re.sub(r"\binline\b|\s+", "", m.group(1))

    # -- pieces ---------------------------------------------------------------------------

    def add(self, pieces: list[Piece], new: list[Piece]) -> None:
        """Append ``new``, merging a piece that shares a line with the one before it."""
        for p in new:
            if pieces and p.start_line <= pieces[-1].end_line:
                last = pieces[-1]
                names = tuple(dict.fromkeys(last.defines + p.defines))[:32]
                pieces[-1] = replace(last, end_line=max(last.end_line, p.end_line), defines=names)
            else:
                pieces.append(p)

    def decl_pieces(
        self, decl: _Decl, prefix: str, depth: int, in_class: bool = False
    ) -> list[Piece]:
        """The piece(s) of one declaration; [] for glue (aliases, plain prototypes)."""
        lx = self.lx
        first = lx.line_of(decl.start)
        last = lx.line_of(max(decl.start, decl.end - 1))
        start, doc_lines = self.leading_comments(first)
        self.floor = max(self.floor, last)
        self.ends.append(last)
        head = " ".join(lx.title_mask[decl.start : decl.head_end].split())
        kind, name, display = head_info(head)
        doc = comment_text(doc_lines)
        if decl.open_i < 0:
            alias = alias_name(head)
            if alias and not in_class:
                self.aliases.append((first, alias))
            if alias or kind != "function" or len(doc_lines) < 2 or head.startswith("friend"):
                return []
        symbol = prefix + display if display else prefix.rstrip(":")
        whole = Piece(
            start,
            last,
            symbol=symbol,
            title=tidy_signature(head),
            doc=doc,
            defines=(name,) if name else (),
        )
        if last - start + 1 <= self.max_lines:
            return [whole]
        if decl.open_i < 0:
            return _parts(whole, pack(start, last, self.max_lines, lines=self.lines))
        if kind == "class" and depth < _MAX_DEPTH and symbol:
            return self.class_pieces(decl, whole, depth)
        cuts = self.statement_cuts(decl.open_i, decl.close_i)
        return _parts(whole, pack(start, last, self.max_lines, cuts, lines=self.lines))

    def leading_comments(self, first: int) -> tuple[int, list[str]]:
        """The first line of the comment block directly above ``first``, and its lines."""
        lx = self.lx
        start = first
        while start - 1 > self.floor:
            ln = start - 1
            if lx.code[ln] or lx.pp[ln] or not (lx.in_block[ln] or self.lines[ln - 1].strip()):
                break
            start = ln
        return start, self.lines[start - 1 : first - 1]

    def class_pieces(self, decl: _Decl, whole: Piece, depth: int) -> list[Piece]:
        """A long class: a header up to its first member piece, then members and glue."""
        lx = self.lx
        close_off = lx.tok_off[decl.close_i] if decl.close_i < self.n_tok else len(lx.text)
        prefix = whole.symbol + "::"
        members = self.scan(
            decl.open_i + 1,
            min(decl.close_i, self.n_tok),
            lx.tok_off[decl.open_i] + 1,
            close_off,
            True,
            prefix,
            depth + 1,
        )
        self.floor = lx.line_of(lx.tok_off[decl.open_i])
        member_pieces: list[Piece] = []
        for m, pre in members:
            self.add(member_pieces, self.decl_pieces(m, pre, depth + 1, in_class=True))
        self.floor = whole.end_line
        member_pieces = [p for p in member_pieces if p.start_line > whole.start_line]
        header_end = member_pieces[0].start_line - 1 if member_pieces else whole.end_line
        cuts = self.statement_cuts(decl.open_i, decl.close_i)
        header = _parts(
            replace(whole, end_line=header_end),
            pack(whole.start_line, header_end, self.max_lines, cuts, lines=self.lines),
        )
        if header_end >= whole.end_line:
            return header

        def glue(s: int, e: int) -> Piece:
            return Piece(s, e, symbol=whole.symbol, title=first_line(self.lines, s, e))

        rest = fill_gaps(
            self.lines,
            member_pieces,
            self.max_lines,
            glue,
            lo=header_end + 1,
            hi=whole.end_line,
            cuts=cuts,
            foldable=self.foldable,
        )
        return header + rest

    def statement_cuts(self, open_i: int, close_i: int) -> list[int]:
        """Lines ending a statement at depth 1 of a body, where the next one starts later."""
        lx = self.lx
        cuts: list[int] = []
        i, stop, paren = open_i + 1, min(close_i, self.n_tok), 0
        while i < stop:
            ch = lx.tok_ch[i]
            end_off = -1
            if ch == "(":
                paren += 1
            elif ch == ")":
                paren = max(0, paren - 1)
            elif ch == ";" and paren == 0:
                end_off = lx.tok_off[i]
            elif ch == "{":
                j = lx.match[i]
                if j >= stop:
                    break
                if paren == 0:
                    end_off = lx.tok_off[j]
                i = j
            if end_off >= 0:
                ln = lx.line_of(end_off)
                nxt = lx.next_code(end_off + 1)
                if nxt < 0 or lx.line_of(nxt) > ln:
                    cuts.append(ln)
            i += 1
        return cuts


def _parts(whole: Piece, ranges: list[tuple[int, int]]) -> list[Piece]:
    n = len(ranges)
    return [
        replace(whole, start_line=s, end_line=e, title=part_title(whole.title, k, n))
        for k, (s, e) in enumerate(ranges, 1)
    ]
