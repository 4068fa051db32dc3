"""``ctxkernel mcp``: serve the agent tools over MCP (stdio, or streamable HTTP)."""

from __future__ import annotations

import click

from .common import index_options


@click.command("mcp")
@click.option(
    "--http", is_flag=True, help="Serve streamable HTTP on --host/--port instead of stdio."
)
@click.option("--host", default="127.0.0.1", show_default=True, help="(--http) Address to bind.")
@click.option("--port", default=8765, show_default=True, type=int, help="(--http) Port to bind.")
@click.option(
    "--warm/--no-warm",
    default=True,
    show_default=True,
    help="Load the embedding model at start-up (in the background) so the first search is fast.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="warning",
    show_default=True,
    help="Logging on stderr (stdout is the protocol).",
)
@index_options
def mcp_cmd(
    http: bool,
    host: str,
    port: int,
    warm: bool,
    log_level: str,
    index_dir: str | None,
    chroma_url: str | None,
) -> int:
    """Serve search, grep, docs, read and list_corpora to an MCP client.

    Over stdio by default (the client spawns this command); with --http, streamable HTTP
    at http://HOST:PORT/mcp. One index and one embedding model per server process.

    \b
    Register it with Claude Code:
      claude mcp add ctxkernel -- ctxkernel mcp
    """
    from ..mcp import serve

    serve(
        index_dir=index_dir,
        chroma_url=chroma_url,
        http=http,
        host=host,
        port=port,
        warm=warm,
        log_level=log_level,
    )
    return 0
