"""`ctxkernel docs TOPIC`: the section or definition that documents a name."""

from __future__ import annotations

import sys
from typing import Any

import click

from harness.optionspec import click_options, from_cli

from ..docs import DocsResult
from ..links.render import render_lines
from ..queries import DocsQuery
from ..render import console, is_terminal, json_line
from .common import index_options, json_option, workspace

_PROSE = {"markdown", "rst", "html", "text", "notebook"}


@click.command("docs")
@click_options(DocsQuery)
@click.option("--plain", is_flag=True, help="Print the text as is, without terminal rendering.")
@index_options
@json_option
def docs_cmd(
    plain: bool, index_dir: str | None, chroma_url: str | None, as_json: bool, **params: Any
) -> int:
    """Look up a PTX instruction or directive, a Triton API or a CuTe/CuTeDSL name.

    Prints the best matching section or definition with its upstream link, then close
    alternatives; suggests spellings when nothing defines the name.

    \b
    Examples:
      ctxkernel docs wgmma.mma_async
      ctxkernel docs tcgen05.mma --arch sm_100
      ctxkernel docs cp.async.bulk.tensor
      ctxkernel docs .reqntid
      ctxkernel docs tl.dot
      ctxkernel docs triton.testing.do_bench
      ctxkernel docs cute.make_layout
    """
    request = from_cli(DocsQuery, params)
    topic = request.topic
    result = request.run(workspace(index_dir, chroma_url))
    if as_json:
        json_line(result.to_json())
        return 0 if result.best else 1
    if not is_terminal():
        return _print_plain(result, topic)
    from rich.markdown import Markdown
    from rich.rule import Rule
    from rich.syntax import Syntax
    from rich.text import Text

    con = console()
    if result.hint:
        con.print(Text(f"note: {result.hint}", style="yellow"))
    if result.best is None:
        con.print(Text(_nothing(result, topic), style="bold red"))
        if result.suggestions:
            con.print("did you mean: " + ", ".join(result.suggestions))
        if result.alternatives:
            con.print(Text(_NEARBY, style="bold"))
            for h in result.alternatives:
                label = h.chunk.title or h.chunk.symbol
                con.print(Text(f"  {h.id}  {label[:80]}", style="dim"))
        return 1
    c = result.best.chunk
    if result.how == "search":
        con.print(Text(_closest_note(result, topic), style="yellow"))
    con.print(Rule(Text(c.title or c.symbol or c.path, style="bold")))
    con.print(Text(c.id, style="cyan"))
    if c.url:
        con.print(Text(c.url, style="underline"))
    con.print()
    if plain:
        con.print(c.text, markup=False, highlight=False)
    elif c.language in _PROSE:
        con.print(Markdown(c.text))
    else:
        lexer = {"cuda": "cuda", "cpp": "cpp"}.get(c.language, "python")
        con.print(
            Syntax(
                c.text,
                lexer,
                line_numbers=True,
                start_line=c.start_line,
                theme="ansi_dark",
                background_color="default",
            )
        )
    link_lines = render_lines(result.links, result.links_total)
    if link_lines:
        con.print()
        con.print(Text("\n".join(link_lines)), markup=False, highlight=False)
    if result.alternatives:
        con.print()
        con.print(Text("also:", style="bold"))
        for h in result.alternatives:
            label = h.chunk.title or h.chunk.symbol
            con.print(Text(f"  {h.id}  {label[:80]}", style="dim"))
    return 0


# with no answer, what the indexed corpora hold under that name (a PTX name's wrappers
# where the ptx corpus is not indexed, what an --arch filter left)
_NEARBY = "not its documentation, but related by name:"


def _nothing(result: DocsResult, topic: str) -> str:
    return f"nothing documents {topic!r}"


def _closest_note(result: DocsResult, topic: str) -> str:
    note = f"no definition of {topic!r}; closest match"
    if result.suggestions:
        note += "; did you mean: " + ", ".join(result.suggestions)
    return note


def _print_plain(result: DocsResult, topic: str) -> int:
    """Piped or logged: the same content as plain lines, no width, nothing wrapped."""
    out = sys.stdout
    if result.hint:
        out.write(f"note: {result.hint}\n")
    if result.best is None:
        out.write(_nothing(result, topic) + "\n")
        if result.suggestions:
            out.write("did you mean: " + ", ".join(result.suggestions) + "\n")
        if result.alternatives:
            out.write(_NEARBY + "\n")
            for h in result.alternatives:
                out.write(f"  {h.id}  {h.chunk.title or h.chunk.symbol}\n")
        return 1
    c = result.best.chunk
    if result.how == "search":
        out.write(_closest_note(result, topic) + "\n")
    out.write(f"== {c.title or c.symbol or c.path}\n{c.id}\n")
    if c.url:
        out.write(c.url + "\n")
    out.write("\n" + c.text.rstrip("\n") + "\n")
    link_lines = render_lines(result.links, result.links_total)
    if link_lines:
        out.write("\n" + "\n".join(link_lines) + "\n")
    if result.alternatives:
        out.write("\nalso:\n")
        for h in result.alternatives:
            out.write(f"  {h.id}  {h.chunk.title or h.chunk.symbol}\n")
    return 0
