"""``ctxkernel mcp``: serve the agent tools over MCP (stdio, or streamable HTTP)."""

from __future__ import annotations

import click

from harness.options import RunOptions
from harness.optionspec import click_options

from .common import index_options


@click.command("mcp")
@click.option(
    "--http", is_flag=True, help="Serve streamable HTTP on --host/--port instead of stdio."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="(--http) Address to bind; anything but loopback is warned about.",
)
@click.option("--port", default=8765, show_default=True, type=int, help="(--http) Port to bind.")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="(--http) Read the bearer token every request must carry from this file (mode "
    "600) instead of making one at start.",
)
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
@click.option("--check", "with_check", is_flag=True, help="Also serve check_kernel (the harness).")
@click.option(
    "--problem",
    type=click.Path(exists=True),
    default=None,
    help="The problem check_kernel checks when a call names none (implies --check).",
)
@click.option(
    "--problems-root",
    "problems_roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="(--check) A folder a call's problem may come from; repeatable (default: the "
    "current directory). --problem itself is always allowed.",
)
@click_options(RunOptions, only=("device", "backend"))  # check_kernel's, declared once
@index_options
def mcp_cmd(
    http: bool,
    host: str,
    port: int,
    token_file: str | None,
    warm: bool,
    log_level: str,
    with_check: bool,
    problem: str | None,
    problems_roots: tuple[str, ...],
    backend: str | None,
    device: str | None,
    index_dir: str | None,
    chroma_url: str | None,
) -> int:
    """Serve search, grep, docs, read and list_corpora to an MCP client.

    Over stdio by default (the client spawns this command); with --http, streamable HTTP
    at http://HOST:PORT/mcp, on loopback unless --host says otherwise, and every request
    must carry 'Authorization: Bearer TOKEN': the token is made at start, printed on
    stderr and kept (mode 600) in the cache dir until the server stops, or read from
    --token-file. One index and one embedding model per server process.

    With --check or --problem it also serves check_kernel, the verification harness
    (each call is kept as a version under runs/agent/). A call may name a problem only
    under a --problems-root folder (default: the current directory).

    \b
    Register it with Claude Code:
      claude mcp add ctxkernel -- ctxkernel mcp
      claude mcp add ctxkernel -- ctxkernel mcp --problem examples/softmax
    """
    from ..errors import UserError
    from ..mcp.roots import ProblemRoots
    from ..mcp.server import serve

    if token_file and not http:
        raise UserError("--token-file is for --http (stdio needs no token: the client spawns it)")
    if problems_roots and not (with_check or problem):
        raise UserError("--problems-root is for --check or --problem (check_kernel's problems)")
    toolset = None
    if with_check or problem:  # check_kernel: the same tool the agent loop uses
        from ..agent.check_tool import CheckSession, make_check_tool
        from ..tools import ToolSet
        from ..workspace import Workspace

        toolset = ToolSet(lambda: Workspace(index_dir, chroma_url))
        options = RunOptions(device=device, backend=backend, record=False)
        session = CheckSession(problem, options, store=lambda: toolset.workspace.store)
        roots = ProblemRoots(problems_roots, problem)
        toolset.register(roots.guard(make_check_tool(session)))
    serve(
        index_dir=index_dir,
        chroma_url=chroma_url,
        http=http,
        host=host,
        port=port,
        token_file=token_file,
        warm=warm,
        log_level=log_level,
        toolset=toolset,
    )
    return 0
