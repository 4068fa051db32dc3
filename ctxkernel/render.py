"""Printers for results: rich text for people, JSON Lines for machines (each object
with a ``type``), and plain text under a token budget for agent tool results."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from .corpus import Hit

SNIPPET_LINES = 12


def json_line(obj: dict[str, Any], out: TextIO | None = None) -> None:
    out = out or sys.stdout
    out.write(json.dumps(obj, ensure_ascii=False) + "\n")


def json_lines(objs: Iterable[dict[str, Any]], out: TextIO | None = None) -> None:
    for obj in objs:
        json_line(obj, out)


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


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
    from rich.syntax import Syntax
    from rich.text import Text

    console = _console()
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
        console.print(header)
        if c.url:
            console.print(Text(f"    {c.url}", style="dim underline"))
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
        console.print(syntax)
        if len(lines) > len(shown):
            console.print(
                Text(
                    f"    … {len(lines) - len(shown)} more lines (ctxkernel show {c.id})",
                    style="dim",
                )
            )
        console.print()


def print_file_range(
    corpus: str, path: str, start: int, lines: Sequence[str], language: str, url: str
) -> None:
    from rich.syntax import Syntax
    from rich.text import Text

    console = _console()
    end = start + len(lines) - 1
    console.print(Text(f"{corpus}:{path}:{start}-{end}", style="bold cyan"))
    if url:
        console.print(Text(url, style="dim underline"))
    if sys.stdout.isatty():
        console.print(
            Syntax(
                "\n".join(lines),
                _lexer(language),
                line_numbers=True,
                start_line=start,
                theme="ansi_dark",
                background_color="default",
            )
        )
    else:
        width = len(str(end))
        for i, line in enumerate(lines, start):
            sys.stdout.write(f"{i:>{width}}  {line}\n")
