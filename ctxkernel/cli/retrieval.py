"""Retrieval commands: index, update, corpora, search, grep, show."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from harness.optionspec import click_options, from_cli

from .. import progress as progress_mod
from ..errors import UserError
from ..queries import GrepQuery, ReadQuery, RelatedQuery, SearchQuery
from ..render import console, counted, json_line, print_file_range, print_hits
from .common import embed_option, index_options, json_option, workspace


@click.command("index")
@click.argument("name")
@click.option(
    "--source",
    metavar="SRC",
    help="Where to take the files from instead of the corpus's upstream: a git URL, a local git repo "
    "or bare mirror, a directory, pkg:<distribution> (an installed Python package), an http(s) page "
    "or a local file.",
)
@click.option(
    "--ref", default="", help="Git branch, tag or commit to index (default: the corpus's ref)."
)
@click.option(
    "--force",
    is_flag=True,
    help="Re-chunk and re-embed everything, even unchanged files (cached vectors are not "
    "used; slow on a CPU).",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="Repair: drop this corpus's index (setting aside a damaged store) and build it "
    "again from the source, reusing cached vectors.",
)
@embed_option
@index_options
@json_option
def index_cmd(
    name: str,
    source: str | None,
    ref: str,
    force: bool,
    rebuild: bool,
    embed: str | None,
    index_dir: str | None,
    chroma_url: str | None,
    as_json: bool,
) -> int:
    """Index the corpus NAME (see `ctxkernel corpora` for the defined ones).

    Clones or reads the source, chunks files by structure, embeds new chunks and
    stores them with a lexical index beside. Re-running only redoes changed files;
    another --embed than the corpus was built with re-embeds its chunks. Files the
    corpus lists as link_only (cutlass: include/cutlass) are chunked for the concept
    links (docs, related, show) only: never embedded, never a search result.

    \b
    Examples:
      ctxkernel index triton --source pkg:triton
      ctxkernel index cutlass --source ~/mirrors/cutlass.git
      ctxkernel index cutlass --embed minilm
      ctxkernel index ptx --source ./ptx-isa.html
      ctxkernel index triton --rebuild      # after an error that names a damaged index
    """
    ws = workspace(index_dir, chroma_url, embed)
    with progress_mod.for_cli(as_json) as progress:
        report = ws.index(
            name, source=source, ref=ref, progress=progress, force=force, rebuild=rebuild
        )
    if as_json:
        json_line(report.to_json())
    else:
        _print_report(report)
    return 0


@click.command("update")
@click.argument("name")
@embed_option
@index_options
@json_option
def update_cmd(
    name: str, embed: str | None, index_dir: str | None, chroma_url: str | None, as_json: bool
) -> int:
    """Pull what changed upstream for NAME (from the source it was indexed from) and re-index the difference."""
    ws = workspace(index_dir, chroma_url, embed)
    with progress_mod.for_cli(as_json) as progress:
        report = ws.update(name, progress=progress)
    if as_json:
        json_line(report.to_json())
    else:
        _print_report(report)
    return 0


def _print_report(report: object) -> None:
    from ..indexer import IndexReport

    assert isinstance(report, IndexReport)
    for note in report.notes:
        click.echo(f"ctxkernel: {note}", err=True)
    skipped = ", ".join(f"{n} {k}" for k, n in sorted(report.skipped.items())) or "none"
    total = sum(report.seconds.values())
    click.echo(
        f"{report.corpus}: {counted(report.files_total, 'file')} ({report.files_changed} changed, "
        f"{report.files_unchanged} unchanged, {report.files_removed} removed), "
        f"{counted(report.chunks_total, 'chunk')}; "
        f"embedded {report.embedded}, reused {report.embeddings_reused}; skipped: {skipped}; {total:.1f} s"
    )
    click.echo(f"  source {report.origin} @ {report.version}")


@click.command("corpora")
@click.option("--offline", is_flag=True, help="Do not ask upstreams whether they moved on.")
@index_options
@json_option
def corpora_cmd(offline: bool, index_dir: str | None, chroma_url: str | None, as_json: bool) -> int:
    """List defined and indexed corpora: source, indexed version, when, files, chunks, size, freshness."""
    ws = workspace(index_dir, chroma_url)
    statuses = ws.status(check_upstream=not offline)
    if as_json:
        for st in statuses:
            json_line(st.to_json())
        return 0
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    cols = (
        "corpus",
        "source",
        "version",
        "indexed",
        "files",
        "chunks",
        "embedder",
        "size",
        "upstream",
    )
    for col in cols:
        table.add_column(col)
    for st in statuses:
        if st.error:
            click.echo(f"ctxkernel: warning: {st.error}", err=True)
        r = st.record
        if r is None:
            state = "broken definition" if st.error else "not indexed"
            table.add_row(st.name, "-", "-", state, "-", "-", "-", "-", "-")
            continue
        when = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.indexed_at)) if r.indexed_at else "-"
        )
        if not r.complete:
            when += " (incomplete: run index again)"
        moved = {True: "moved on: run update", False: "up to date", None: "unknown"}[st.moved_on]
        table.add_row(
            st.name,
            r.origin,
            r.version[:24],
            when,
            str(r.files),
            str(r.chunks),
            r.embedder or r.model or "-",
            _size(st.size_bytes),
            moved,
        )
    console().print(table)
    return 0


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n //= 1024
    return f"{n} TB"


@click.command("search")
@click_options(SearchQuery)
@click.option(
    "--embed",
    "embed",
    default=None,
    metavar="EMBEDDER",
    help="Insist on this embedder (static, minilm, a model directory): a corpus built with "
    "another one is an error. Default: each corpus with the embedder that built it.",
)
@index_options
@json_option
def search_cmd(
    index_dir: str | None, chroma_url: str | None, embed: str | None, as_json: bool, **params: Any
) -> int:
    """Search the index in plain words or by name (hybrid lexical + dense).

    QUERY is what to look for: a question in plain words or a name.

    \b
    Examples:
      ctxkernel search "TMA load into shared memory with an mbarrier" --corpus cutlass -k 10
      ctxkernel search make_tiled_copy --kind source
      ctxkernel search "warp-specialized GEMM with TMA" --arch sm_90
      ctxkernel search "pipeline the main loop" --rerank --rerank-model ~/models/ms-marco-MiniLM-L6-v2
    """
    request = from_cli(SearchQuery, params)
    query = request.query
    result = request.run(workspace(index_dir, chroma_url, embed))
    for line in result.skipped.values():
        click.echo(f"ctxkernel: warning: skipped: {line}", err=True)
    if as_json:
        for hit in result.hits:
            json_line(hit.to_json())
        json_line(
            {
                "type": "summary",
                "query": query,
                "mode": result.mode,
                "hits": len(result.hits),
                "took_ms": round(result.took_ms, 1),
                "corpora": result.corpora,
                "skipped": result.skipped,
            }
        )
    else:
        if not result.hits:
            click.echo("no results", err=True)
        print_hits(result.hits, snippet_lines=request.lines_per_hit)
        click.echo(f"{counted(len(result.hits), 'result')} in {result.took_ms:.0f} ms", err=True)
    return 0 if result.hits else 1


@click.command("grep")
@click_options(GrepQuery)
@index_options
@json_option
def grep_cmd(index_dir: str | None, chroma_url: str | None, as_json: bool, **params: Any) -> int:
    """Regex search over a corpus's files (ripgrep when installed, Python otherwise).

    PATTERN is the regular expression (Rust regex / ripgrep syntax).

    \b
    Example:
      ctxkernel grep "make_tiled_copy" --corpus cutlass -C 3
    """
    request = from_cli(GrepQuery, params)
    pattern, corpus, context = request.pattern, request.corpus, request.context
    result = request.run(workspace(index_dir, chroma_url))
    if as_json:
        for hit in result.hits:
            json_line(hit.to_json())
        json_line(
            {
                "type": "summary",
                "pattern": pattern,
                "hits": len(result.hits),
                "files_searched": result.files_searched,
                "truncated": result.truncated,
                "engine": result.engine,
                "took_ms": round(result.took_ms, 1),
                "refused": result.refused,
                "complete": not result.timed_out,
            }
        )
    else:
        print_hits(result.hits, snippet_lines=2 * context + 20, show_score=False)
    if result.timed_out:
        # a part of the answer is not "nothing found" (exit 1) nor the answer (exit 0):
        # what came by then is printed, and the error says how much and what to change
        raise UserError(
            f"grep stopped at its {result.truncated} before it searched all "
            f"{counted(result.files_searched, 'file')}: a partial result of "
            f"{counted(len(result.hits), 'block')}; narrow it with --path or a more specific "
            "pattern, or raise --timeout"
        )
    if not as_json:
        note = f"; stopped early: {result.truncated}" if result.truncated else ""
        if result.refused:
            note += (
                f"; left out {counted(result.refused, 'file')} swapped after indexing for a "
                "link or another file "
                f"(re-index with `ctxkernel index {corpus}`)"
            )
        click.echo(
            f"{counted(len(result.hits), 'block')} in {counted(result.files_searched, 'file')} "
            f"({result.engine}, {result.took_ms:.0f} ms){note}",
            err=True,
        )
    return 0 if result.hits else 1


@click.command("show")
@click_options(ReadQuery)
@index_options
@json_option
def show_cmd(index_dir: str | None, chroma_url: str | None, as_json: bool, **params: Any) -> int:
    """Print lines of an indexed file: REF is corpus:path[:start-end], as search and grep print it.

    \b
    Example:
      ctxkernel show cutlass:examples/python/CuTeDSL/hopper/dense_gemm.py:120-180
    """
    request = from_cli(ReadQuery, params)
    ws = workspace(index_dir, chroma_url)
    rng = ws.read(request.ref, request.start_line, request.end_line)
    if as_json:
        json_line(rng.to_json())
    else:
        print_file_range(rng.corpus, rng.path, rng.start_line, rng.lines, rng.language, rng.url)
        if rng.source == "chunks":
            print("(rebuilt from the index: the file is not on this machine)", file=sys.stderr)
    return 0


@click.command("related")
@click_options(RelatedQuery)
@index_options
@json_option
def related_cmd(index_dir: str | None, chroma_url: str | None, as_json: bool, **params: Any) -> int:
    """What the concept links connect to a hit: the PTX section it implements, the other
    wrappers of that instruction, its callers and sibling examples.

    REF is a hit id corpus:path:start-end (or corpus:path:line), as hits print it.

    \b
    Examples:
      ctxkernel related cutlass:include/cute/arch/mma_sm90_gmma.hpp:128-172
      ctxkernel related ptx:9_instruction_set/.../971552_asynchronous_multiply_and_accumulate_instruction_wgmmamma_async.md:1-80 --arch sm_90
    """
    from ..related import render_related

    rel = from_cli(RelatedQuery, params).run(workspace(index_dir, chroma_url))
    if as_json:
        json_line(rel.to_json())
    else:
        click.echo("\n".join(render_related(rel)))
    return 0 if rel.concepts else 1
