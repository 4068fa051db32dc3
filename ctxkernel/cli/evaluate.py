"""`ctxkernel eval`: score retrieval on judged queries, several modes in one run."""

from __future__ import annotations

from pathlib import Path

import click

from ..render import json_line
from .common import index_options, json_option, workspace


@click.command("eval")
@click.argument("queries", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--modes",
    default="hybrid,lexical,dense",
    show_default=True,
    help="Comma-separated search modes to compare.",
)
@click.option(
    "--misses",
    "show_misses",
    is_flag=True,
    help="Also list the queries whose best answer was not ranked first.",
)
@index_options
@json_option
def eval_cmd(
    queries: Path,
    modes: str,
    show_misses: bool,
    index_dir: str | None,
    chroma_url: str | None,
    as_json: bool,
) -> int:
    """Recall@1/5/10, MRR@10, nDCG@10 and latency of QUERIES (JSON Lines with judged
    targets), per mode, overall, per corpus and per query kind.

    \b
    Example:
      ctxkernel eval bench/queries/dev.jsonl --modes hybrid,lexical,dense
    """
    from ..errors import UserError
    from ..evaluate import load_queries, misses, run, summarize
    from ..search import MODES

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    for m in chosen:
        if m not in MODES:
            raise UserError(f"unknown mode {m!r} (one of {', '.join(MODES)})")
    ws = workspace(index_dir, chroma_url)
    qs = load_queries(queries)
    results = run(ws, qs, chosen)
    rows = summarize(results)
    skipped = sorted({q.corpus for q in qs} - set(ws.store.corpora()))
    if skipped:
        click.echo(
            f"skipped the queries of corpora that are not indexed: {', '.join(skipped)}", err=True
        )
    if as_json:
        for row in rows:
            json_line(row)
        if show_misses:
            for miss in misses(results):
                json_line(miss)
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    cols = [
        "mode",
        "group",
        "n",
        "recall@1",
        "recall@5",
        "recall@10",
        "mrr@10",
        "ndcg@10",
        "p50_ms",
        "p95_ms",
    ]
    for c in cols:
        table.add_column(c)
    for row in rows:
        table.add_row(*(str(row[c]) for c in cols))
    console = Console()
    console.print(table)
    if show_misses:
        for miss in misses(results):
            console.print(
                f"[dim]rank {miss['rank'] or '-'}[/dim] {miss['id']}: {miss['query']}  →  {', '.join(miss['top'])}"
            )
    return 0
