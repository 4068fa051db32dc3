"""Printers for results: rich text for people at a terminal, plain text when piped or
logged, JSON Lines for machines (each object with a ``type``).

Nothing is hard-wrapped: on a terminal rich uses its width and leaves ids, URLs and
``show`` hints whole (the terminal folds them), and piped output has no width at all, so
a URL or a hit id copied from a log is the URL or the id."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .corpus import Hit

SNIPPET_LINES = 12


def counted(n: int, one: str, many: str = "") -> str:
    """``1 result``, ``2 results``: a count with its noun in the right number (``many``
    for a plural that is not ``one`` + s)."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def json_line(obj: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")


NO_WIDTH = 100_000  # the width rich gets when output is not a terminal: never reached


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def console() -> Any:
    """A rich Console on stdout: the terminal's width on a terminal, none otherwise."""
    from rich.console import Console

    if is_terminal():
        return Console(highlight=False, soft_wrap=True)
    return Console(highlight=False, soft_wrap=True, width=NO_WIDTH, color_system=None)


def _lexer(language: str) -> str:
    return {
        "cpp": "cpp",
        "cuda": "cuda",
        "python": "python",
        "markdown": "markdown",
        "rst": "rst",
    }.get(language, "text")


def print_hits(
    hits: Sequence[Hit], *, snippet_lines: int = SNIPPET_LINES, show_score: bool = True
) -> None:
    """Search and grep results for a person: a header line each, then a numbered snippet."""
    if not is_terminal():
        _plain_hits(hits, snippet_lines, show_score)
        return
    from rich.syntax import Syntax
    from rich.text import Text

    con = console()
    for hit in hits:
        c = hit.chunk
        header = Text()
        header.append(f"{hit.rank:>2}. ", style="dim")
        header.append(c.id, style="bold cyan")
        if show_score and hit.via != "grep":
            header.append(f"  {hit.score:.4f}", style="dim")
        if c.symbol:
            header.append(f"  {c.symbol}", style="green")
        if c.kind:
            header.append(f"  [{c.kind}]", style="magenta")
        if hit.extra.get("requires"):
            header.append(f"  needs {hit.extra['requires']}", style="yellow")
        con.print(header)
        if c.url:
            con.print(Text(f"    {c.url}", style="dim underline"))
        lines = c.text.splitlines()
        shown = lines[:snippet_lines]
        highlight = {ln - c.start_line + 1 for ln in hit.extra.get("matches", [])}
        syntax = Syntax(
            "\n".join(shown),
            _lexer(c.language),
            line_numbers=True,
            start_line=c.start_line,
            highlight_lines={c.start_line + i - 1 for i in highlight},
            word_wrap=False,
            theme="ansi_dark",
            background_color="default",
        )
        con.print(syntax)
        if len(lines) > len(shown):
            con.print(
                Text(
                    f"    … {counted(len(lines) - len(shown), 'more line')} (ctxkernel show {c.id})",
                    style="dim",
                )
            )
        con.print()


def _hit_head(hit: Hit, show_score: bool) -> str:
    c = hit.chunk
    head = f"{hit.rank:>2}. {c.id}"
    if show_score and hit.via != "grep":
        head += f"  {hit.score:.4f}"
    if c.symbol:
        head += f"  {c.symbol}"
    if c.kind:
        head += f"  [{c.kind}]"
    if hit.extra.get("requires"):
        head += f"  needs {hit.extra['requires']}"
    return head


def _plain_hits(hits: Sequence[Hit], snippet_lines: int, show_score: bool) -> None:
    """Hits as plain lines, nothing wrapped or cut: match lines marked ``N:``."""
    out = sys.stdout
    for hit in hits:
        c = hit.chunk
        out.write(_hit_head(hit, show_score) + "\n")
        if c.url:
            out.write(f"    {c.url}\n")
        lines = c.text.splitlines()
        shown = lines[:snippet_lines]
        matches = set(hit.extra.get("matches", []))
        width = len(str(c.start_line + max(0, len(shown) - 1)))
        for i, line in enumerate(shown):
            n = c.start_line + i
            out.write(f"  {n:>{width}}{':' if n in matches else ' '} {line}\n")
        if len(lines) > len(shown):
            out.write(
                f"    … {counted(len(lines) - len(shown), 'more line')} (ctxkernel show {c.id})\n"
            )
        out.write("\n")


def print_file_range(
    corpus: str, path: str, start: int, lines: Sequence[str], language: str, url: str
) -> None:
    end = start + len(lines) - 1
    if not is_terminal():
        sys.stdout.write(f"{corpus}:{path}:{start}-{end}\n")
        if url:
            sys.stdout.write(url + "\n")
        width = len(str(end))
        for i, line in enumerate(lines, start):
            sys.stdout.write(f"{i:>{width}}  {line}\n")
        return
    from rich.syntax import Syntax
    from rich.text import Text

    con = console()
    con.print(Text(f"{corpus}:{path}:{start}-{end}", style="bold cyan"))
    if url:
        con.print(Text(url, style="dim underline"))
    con.print(
        Syntax(
            "\n".join(lines),
            _lexer(language),
            line_numbers=True,
            start_line=start,
            theme="ansi_dark",
            background_color="default",
        )
    )
