"""`ctxkernel eval`: score retrieval on judged query sets, several modes and
configurations (index directories, search settings) compared in one run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..render import json_line
from .common import index_options, json_option, workspace

Row = dict[str, Any]
SHORT = {
    "recall@1": "R@1",
    "recall@5": "R@5",
    "recall@10": "R@10",
    "mrr@10": "MRR",
    "ndcg@10": "nDCG",
    "p50_ms": "p50ms",
    "p95_ms": "p95ms",
}


@click.command("eval")
@click.argument("queries", nargs=-1, required=True, metavar="[NAME=]QUERIES...")
@click.option(
    "--modes",
    default="hybrid,lexical,dense",
    show_default=True,
    help="Comma-separated search modes to compare.",
)
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="NAME=key:value,...",
    help="Another configuration on the same queries: search settings (fusion weights, "
    "Searcher attributes, search-module constants, other ranking modules' as "
    "lexical.NAME; see --settings), index:DIR, "
    "rerank:true. Repeatable; one named 'base' replaces the default.",
)
@click.option(
    "--against-index-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also run the queries on this index (configuration 'against').",
)
@click.option(
    "--by",
    default="corpus,kind",
    show_default=True,
    help="Groups besides 'all': corpus, kind, corpus-kind.",
)
@click.option(
    "--file-level",
    is_flag=True,
    help="Count a hit whose file holds a target (to compare with whole-file rankers).",
)
@click.option(
    "--misses",
    "show_misses",
    is_flag=True,
    help="List the hybrid queries whose best answer was not ranked first, except those "
    "of a set named 'test' (keep test misses unread while tuning).",
)
@click.option(
    "--misses-of",
    multiple=True,
    metavar="SET",
    help="List the misses of this set (test included). Repeatable.",
)
@click.option(
    "--context",
    "with_context",
    is_flag=True,
    help="Also report context efficiency: the share of the judged lines inside the first "
    "2,000 and 8,000 tokens of the search tool's output and of a scripted grep-only "
    "agent's (ripgrep on the query's distinctive terms, top files read in order).",
)
@click.option("--markdown", is_flag=True, help="Print Markdown tables (for bench/RESULTS.md).")
@click.option(
    "--settings",
    "list_settings",
    is_flag=True,
    help="List the settings --config accepts, with their current values, and exit.",
)
@index_options
@json_option
def eval_cmd(
    queries: tuple[str, ...],
    modes: str,
    configs: tuple[str, ...],
    against_index_dir: str | None,
    by: str,
    file_level: bool,
    show_misses: bool,
    misses_of: tuple[str, ...],
    with_context: bool,
    markdown: bool,
    list_settings: bool,
    index_dir: str | None,
    chroma_url: str | None,
    as_json: bool,
) -> int:
    """Recall@1/5/10, MRR@10, nDCG@10 and latency of query sets (JSON Lines with judged
    targets; NAME=PATH names a set, else it is named after the file), per set, mode,
    configuration, overall, per corpus and per query kind. With several configurations,
    each is compared with the first (deltas, queries better/worse).

    \b
    Examples:
      ctxkernel eval dev=bench/queries/eval-dev.jsonl old=bench/queries/dev.jsonl
      ctxkernel eval bench/queries/eval-dev.jsonl --modes hybrid \\
          --config heavy-dense=dense:3.0,RRF_K:40
      ctxkernel eval bench/queries/eval-dev.jsonl --index-dir A --against-index-dir B
    """
    from ..errors import UserError
    from ..evaluate import (
        Config,
        WorkspaceRanker,
        compare,
        load_query_sets,
        misses,
        run,
        settable,
        summarize,
    )
    from ..search import MODES

    chosen = [m.strip() for m in modes.split(",") if m.strip()]
    for m in chosen:
        if m not in MODES:
            raise UserError(f"unknown mode {m!r} (one of {', '.join(MODES)})")
    groups = [b.strip() for b in by.split(",") if b.strip()]
    for b in groups:
        if b not in ("corpus", "kind", "corpus-kind"):
            raise UserError(f"unknown --by {b!r} (corpus, kind, corpus-kind)")
    base_ws = workspace(index_dir, chroma_url)
    if list_settings:
        for key, (owner, attr) in sorted(settable(base_ws.searcher).items()):
            value = getattr(owner, attr)
            if as_json:
                json_line({"type": "setting", "key": key, "value": value})
            else:
                click.echo(f"{key} = {value!r}")
        return 0
    cfgs = [Config.parse(c) for c in configs]
    if against_index_dir:
        cfgs.append(Config("against", against_index_dir))
    if not any(c.name == "base" for c in cfgs):
        cfgs.insert(0, Config("base"))
    else:
        cfgs.sort(key=lambda c: c.name != "base")
    names = [c.name for c in cfgs]
    if len(set(names)) != len(names):
        raise UserError(f"two configurations share a name: {', '.join(names)}")
    sets = load_query_sets(queries)
    rankers = []
    for c in cfgs:
        if c.index_dir is not None and not Path(c.index_dir).is_dir() and not chroma_url:
            raise UserError(f"config {c.name}: {c.index_dir}: no such index directory")
        ws = base_ws if c.index_dir is None else workspace(c.index_dir, chroma_url)
        rankers.append(WorkspaceRanker(ws, c))
    note = (lambda s: click.echo(f"eval: {s}", err=True)) if sys.stderr.isatty() else None
    results = run(rankers, sets, chosen, file_level=file_level, progress=note)
    rows = summarize(results, groups)
    deltas = compare(results, groups)
    for s in sets:
        skipped = sorted({q.corpus for q in s.queries} - set(base_ws.store.corpora()))
        if skipped:
            click.echo(
                f"{s.name}: skipped the queries of corpora that are not indexed: "
                f"{', '.join(skipped)}",
                err=True,
            )
    miss_sets = [s.name for s in sets if s.name != "test"] if show_misses else []
    miss_sets += [m for m in misses_of if m not in miss_sets]
    unknown = [m for m in misses_of if m not in {s.name for s in sets}]
    if unknown:
        raise UserError(f"--misses-of {unknown[0]}: no such query set")
    missed = misses(results, sets=miss_sets) if miss_sets else []
    context: list[Row] = []
    if with_context:
        from ..context_eval import run as context_run

        context = context_run(base_ws, sets, by=groups)
    if as_json:
        for row in [*rows, *deltas, *context, *missed]:
            json_line(row)
        return 0
    if markdown:
        _print_markdown(rows, deltas, missed)
        if context:
            click.echo("\n" + _context_markdown(context))
        return 0
    _print_tables(rows, deltas, missed)
    if context:
        click.echo("\n" + _context_markdown(context))
    return 0


def _context_markdown(rows: list[Row]) -> str:
    """Context efficiency, one line per (set, group), the readers side by side."""
    readers = list(dict.fromkeys(r["reader"] for r in rows))
    budgets = [k for k in rows[0] if k.startswith("ctx@")]
    head = ["set", "group", "n"] + [f"{r} {b}" for r in readers for b in budgets]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keyed = {(r["set"], r["group"], r["reader"]): r for r in rows}
    for set_name, group in dict.fromkeys((r["set"], r["group"]) for r in rows):
        first = keyed[(set_name, group, readers[0])]
        cells = [set_name, group, str(first["n"])]
        for reader in readers:
            row = keyed.get((set_name, group, reader))
            cells += [f"{row[b]:.3f}" if row else "" for b in budgets]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _print_markdown(rows: list[Row], deltas: list[Row], missed: list[Row]) -> None:
    from ..evaluate import markdown

    click.echo(markdown(rows, deltas))
    for miss in missed:
        click.echo(_miss_line(miss))


def _print_tables(rows: list[Row], deltas: list[Row], missed: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..evaluate import table, table_header

    # piped output keeps a wide table rather than rich's 80 columns
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 180)
    head = [SHORT.get(c, c) for c in table_header(bool(deltas))]
    for set_name in dict.fromkeys(r["set"] for r in rows):
        t = Table(box=None, header_style="bold", title=f"set {set_name}", title_justify="left")
        for c in head[1:]:
            t.add_column(c, justify="left" if c in ("group", "mode", "config") else "right")
        mine = [r for r in rows if r["set"] == set_name]
        theirs = [d for d in deltas if d["set"] == set_name]
        last_group = None
        for cells in table(mine, theirs):
            if last_group is not None and cells[1] != last_group:
                t.add_section()
            last_group = cells[1]
            t.add_row(*cells[1:])
        console.print(t)
    for miss in missed:
        console.print(_miss_line(miss), markup=False)


def _miss_line(miss: Row) -> str:
    return (
        f"[{miss['set']} {miss['config']}] rank {miss['rank'] or '-'} {miss['id']}: "
        f"{miss['query']}  ->  {', '.join(miss['top'])}"
    )
