"""`ctxkernel docs TOPIC`: the section or definition that documents a name."""

from __future__ import annotations

import click

from ..render import json_line
from .common import index_options, json_option, workspace

_PROSE = {"markdown", "rst", "html", "text", "notebook"}


@click.command("docs")
@click.argument("topic")
@click.option(
    "--corpus", "-c", "corpora", multiple=True, help="Only these corpora (default: all indexed)."
)
@click.option(
    "--alternatives",
    "-n",
    default=5,
    show_default=True,
    help="How many close alternatives to list.",
)
@click.option("--plain", is_flag=True, help="Print the text as is, without terminal rendering.")
@index_options
@json_option
def docs_cmd(
    topic: str,
    corpora: tuple[str, ...],
    alternatives: int,
    plain: bool,
    index_dir: str | None,
    chroma_url: str | None,
    as_json: bool,
) -> int:
    """Look up a PTX instruction or directive, a Triton API or a CuTe/CuTeDSL name.

    Prints the best matching section or definition with its upstream link, then close
    alternatives; suggests spellings when nothing defines the name.

    \b
    Examples:
      ctxkernel docs wgmma.mma_async
      ctxkernel docs cp.async.bulk.tensor
      ctxkernel docs .reqntid
      ctxkernel docs tl.dot
      ctxkernel docs triton.testing.do_bench
      ctxkernel docs cute.make_layout
    """
    ws = workspace(index_dir, chroma_url)
    result = ws.docs(topic, list(corpora) or None, alternatives)
    if as_json:
        json_line(result.to_json())
        return 0 if result.best else 1
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.rule import Rule
    from rich.syntax import Syntax
    from rich.text import Text

    console = Console(highlight=False)
    if result.best is None:
        console.print(f"nothing documents {topic!r}", style="bold red")
        if result.suggestions:
            console.print("did you mean: " + ", ".join(result.suggestions))
        return 1
    c = result.best.chunk
    if result.how == "search":
        note = f"no definition of {topic!r}; closest match"
        if result.suggestions:
            note += "; did you mean: " + ", ".join(result.suggestions)
        console.print(note, style="yellow")
    console.print(Rule(Text(c.title or c.symbol or c.path, style="bold")))
    console.print(Text(c.id, style="cyan"))
    if c.url:
        console.print(Text(c.url, style="underline"))
    console.print()
    if plain or not console.is_terminal:
        console.print(c.text, markup=False, highlight=False)
    elif c.language in _PROSE:
        console.print(Markdown(c.text))
    else:
        lexer = {"cuda": "cuda", "cpp": "cpp"}.get(c.language, "python")
        console.print(
            Syntax(
                c.text,
                lexer,
                line_numbers=True,
                start_line=c.start_line,
                theme="ansi_dark",
                background_color="default",
            )
        )
    if result.alternatives:
        console.print()
        console.print(Text("also:", style="bold"))
        for h in result.alternatives:
            label = h.chunk.title or h.chunk.symbol
            console.print(Text(f"  {h.id}  {label[:80]}", style="dim"))
    return 0
