"""The Python chunker: functions, classes and methods found by the AST, glue in between.

A def or class piece starts at its first decorator (or at the comment lines directly
above it) and carries its docstring, so ``@triton.jit`` kernels and ``@cute.kernel``
functions arrive whole. A class longer than ``max_lines`` becomes a header piece (class
line, docstring, attributes up to the first method) plus one piece per method; a long
function is split at the statement boundaries of its body. Module-level statements
(imports, constants, ``if __name__ == ...``) become glue pieces of contiguous lines.
Files the AST cannot parse (Python 2, templates) go to the lines chunker.
"""

from __future__ import annotations

import ast
import itertools
import re
import warnings
from dataclasses import dataclass, replace

from . import lines as lines_chunker
from ._merge import (
    DOC_CHARS,
    TINY_GLUE_LINES,
    clip,
    fill_gaps,
    finalize,
    first_line,
    one_line,
    pack,
    part_title,
    tidy_signature,
)
from .base import DEFAULT_MAX_LINES, Piece

_DefNode = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
# The line breaks the tokenizer knows; str.splitlines() knows more (\f, \x1c, \u2028...).
_AST_BREAK = re.compile(r"\r\n|\r|\n")
_EXTRA_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def chunk(text: str, path: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Piece]:
    """Cut Python source into def/class pieces and module glue; lines windows if unparsable."""
    if not text.strip():
        return []
    source = text[1:] if text.startswith("\ufeff") else text
    try:
        with warnings.catch_warnings():  # invalid escapes etc. are the file's business
            warnings.simplefilter("ignore")
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return lines_chunker.chunk(text, path, max_lines)
    ast_lines = _AST_BREAK.split(source)
    ctx = _Ctx(ast_lines, max(1, max_lines), ast.get_docstring(tree) or "", _docstring_span(tree))
    pieces = _body(ctx, tree.body, 1, len(ast_lines), "", "")
    lines = text.splitlines()
    return finalize(_to_splitlines(pieces, source, len(lines)), lines)


@dataclass(frozen=True)
class _Ctx:
    lines: list[str]  # the source split the way the tokenizer splits it
    max_lines: int
    module_doc: str
    module_doc_span: tuple[int, int]


def _body(
    ctx: _Ctx,
    stmts: list[ast.stmt],
    lo: int,
    hi: int,
    prefix: str,
    glue_symbol: str,
    floor: int | None = None,
) -> list[Piece]:
    """Pieces for the statements of one body (module or class) lying in lines ``lo..hi``.

    ``floor``: the last line that is not the body's own (a class's header), so comments
    above the body's first def attach to it.
    """
    units: list[Piece] = []
    cuts: list[int] = []
    prev_end = lo - 1 if floor is None else floor
    for i, st in enumerate(stmts):
        if isinstance(st, _DefNode):
            start = _unit_start(ctx.lines, st, prev_end)
            if start >= lo:
                units.extend(_unit_pieces(ctx, st, start, _end(st), prefix))
        nxt = stmts[i + 1] if i + 1 < len(stmts) else None
        if nxt is not None and _stmt_start(nxt) > _end(st):
            cuts.append(_end(st))
        prev_end = _end(st)

    def glue(s: int, e: int) -> Piece:
        ds, de = ctx.module_doc_span
        doc = ""
        if not prefix and s <= ds and de <= e:
            doc = ctx.module_doc
        elif not prefix and s <= de and ds <= e:
            # a long module docstring split across pieces: each carries its own part
            # (CuTeDSL examples explain the technique there, far below the first line)
            part = "\n".join(ctx.lines[ln - 1] for ln in range(max(s, ds), min(e, de) + 1))
            doc = part.strip().strip("\"'rRuU").strip()
        return Piece(
            s, e, symbol=glue_symbol, title=first_line(ctx.lines, s, e), doc=clip(doc, DOC_CHARS)
        )

    def comments_only(s: int, e: int) -> bool:
        text = [ctx.lines[ln - 1].strip() for ln in range(s, e + 1)]
        body = [t for t in text if t]
        return len(body) <= TINY_GLUE_LINES and all(t.startswith("#") for t in body)

    return fill_gaps(
        ctx.lines, units, ctx.max_lines, glue, lo=lo, hi=hi, cuts=cuts, foldable=comments_only
    )


def _unit_pieces(ctx: _Ctx, node: _DefNode, start: int, end: int, prefix: str) -> list[Piece]:
    """One piece for a def or class, or several when it is longer than ``max_lines``."""
    qual = prefix + node.name
    title = _signature(ctx.lines, node)
    doc = clip(ast.get_docstring(node) or "", DOC_CHARS)
    whole = Piece(start, end, symbol=qual, title=title, doc=doc, defines=(node.name,))
    if end - start + 1 <= ctx.max_lines:
        if isinstance(node, ast.ClassDef):
            # a class kept whole defines its methods too: `partition_S` finds `ThrCopy`
            methods = tuple(
                st.name for st in node.body if isinstance(st, _DefNode) and st.name != node.name
            )
            whole = replace(whole, defines=(node.name, *dict.fromkeys(methods)))
        return [whole]
    if isinstance(node, ast.ClassDef):
        return _class_pieces(ctx, node, whole)
    body = node.body
    strong = [_end(a) for a, b in itertools.pairwise(body) if _stmt_start(b) > _end(a)]
    weak = [_end(n) for n in ast.walk(node) if isinstance(n, ast.stmt) and n is not node]
    return _parts(whole, pack(start, end, ctx.max_lines, strong, weak, lines=ctx.lines))


def _class_pieces(ctx: _Ctx, node: ast.ClassDef, whole: Piece) -> list[Piece]:
    """A long class: header (up to the first method) in parts, then its members."""
    header_end = whole.end_line
    floor = prev_end = _signature_end(node)
    for st in node.body:
        if isinstance(st, _DefNode):
            header_end = _unit_start(ctx.lines, st, prev_end) - 1
            break
        prev_end = _end(st)
    header_stmts = [st for st in node.body if _end(st) <= header_end]
    cuts = [_end(st) for st in header_stmts]
    header = _parts(
        replace(whole, end_line=header_end),
        pack(whole.start_line, header_end, ctx.max_lines, cuts, lines=ctx.lines),
    )
    members: list[Piece] = []
    if header_end < whole.end_line:
        members = _body(
            ctx,
            node.body,
            header_end + 1,
            whole.end_line,
            whole.symbol + ".",
            whole.symbol,
            floor,
        )
    return header + members


def _parts(whole: Piece, ranges: list[tuple[int, int]]) -> list[Piece]:
    n = len(ranges)
    return [
        replace(whole, start_line=s, end_line=e, title=part_title(whole.title, k, n))
        for k, (s, e) in enumerate(ranges, 1)
    ]


def _end(node: ast.stmt) -> int:
    return node.end_lineno if node.end_lineno is not None else node.lineno


def _stmt_start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def _unit_start(lines: list[str], node: ast.stmt, floor: int) -> int:
    """First line of a def: its first decorator, or comment lines directly above it."""
    start = _stmt_start(node)
    while start - 1 > floor and lines[start - 2].lstrip().startswith("#"):
        start -= 1
    return start


def _signature_end(node: ast.ClassDef) -> int:
    """The last line of a ``class`` header that holds a base or keyword (or its first)."""
    parts: list[ast.expr | ast.keyword] = [*node.bases, *node.keywords]
    return max([node.lineno, *(p.end_lineno or p.lineno for p in parts)])


def _signature(lines: list[str], node: _DefNode) -> str:
    """The ``def``/``class`` header up to its colon, joined across lines, comments dropped."""
    out: list[str] = []
    depth = 0
    quote = ""
    ln = node.lineno - 1
    stop = min(len(lines), _end(node))
    col = len(lines[ln]) - len(lines[ln].lstrip()) if ln < len(lines) else 0
    while ln < stop:
        line = lines[ln]
        i = col
        while i < len(line):
            ch = line[i]
            if quote:
                if line.startswith(quote, i):
                    out.append(quote)
                    i += len(quote)
                    quote = ""
                else:
                    out.append(line[i : i + 2] if ch == "\\" else ch)
                    i += 2 if ch == "\\" else 1
                continue
            if ch == "#":
                break
            if ch in "\"'":
                quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else ch
                out.append(quote)
                i += len(quote)
                continue
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == ":" and depth <= 0:
                return tidy_signature("".join(out))
            out.append(ch)
            i += 1
        if len(quote) == 1:
            quote = ""
        out.append(" ")
        ln += 1
        col = 0
    return one_line(lines[node.lineno - 1]) if node.lineno <= len(lines) else ""


def _docstring_span(tree: ast.Module) -> tuple[int, int]:
    if tree.body and ast.get_docstring(tree) is not None:
        first = tree.body[0]
        return first.lineno, _end(first)
    return (0, -1)


def _to_splitlines(pieces: list[Piece], source: str, n_lines: int) -> list[Piece]:
    """Map line numbers from the tokenizer's line breaks to ``str.splitlines()``'s.

    Only differs when the text holds a break the tokenizer does not count (a form feed,
    U+2028 in a string): each such character adds a line for ``splitlines``.
    """
    if not any(c in source for c in _EXTRA_BREAKS):
        return pieces
    first: list[int] = [0]  # first[k]: splitlines line where tokenizer line k starts
    last: list[int] = [0]
    line = 1
    for seg in _AST_BREAK.split(source):
        extra = sum(seg.count(c) for c in _EXTRA_BREAKS)
        first.append(line)
        last.append(line + extra)
        line += extra + 1

    def at(k: int, table: list[int]) -> int:
        return max(1, min(table[min(k, len(table) - 1)], n_lines))

    return [
        replace(p, start_line=at(p.start_line, first), end_line=at(p.end_line, last))
        for p in pieces
    ]
