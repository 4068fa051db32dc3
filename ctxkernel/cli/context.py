"""``ctxkernel context init DIR``: a ready-to-use working directory for an external agent
(Claude Code, or any MCP client) that runs the same loop as ``ctxkernel agent``.

It writes ``CLAUDE.md`` and ``AGENTS.md`` (the same instructions: the tools, the problem,
the device, the backend primer, the loop and its rules) and ``.mcp.json`` registering
``ctxkernel mcp --problem PROBLEM``, which serves the retrieval tools and ``check_kernel``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from harness import envvars
from harness.optionspec import click_options

from ..agent.state import AgentConfig
from ..errors import UserError
from .common import index_options

FILES = ("CLAUDE.md", "AGENTS.md", ".mcp.json")


@click.group("context")
def context_group() -> None:
    """Working directories for external agents (Claude Code, other MCP clients)."""


@context_group.command("init")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--problem", "-p", required=True, type=click.Path(exists=True, path_type=Path),
              help="The problem: a problem.py or its directory.")  # fmt: skip
@click_options(AgentConfig, only=("backend", "target", "device"))  # the agent's, declared once
@click.option("--force", is_flag=True, help="Overwrite the files if they exist.")
@index_options
def init_cmd(
    directory: Path,
    problem: Path,
    backend: str,
    target: float,
    device: str | None,
    force: bool,
    index_dir: str | None,
    chroma_url: str | None,
) -> int:
    """Write CLAUDE.md, AGENTS.md and .mcp.json into DIRECTORY for PROBLEM.

    \b
    Then:
      cd DIRECTORY && claude      # Claude Code picks up .mcp.json and CLAUDE.md
    """
    from harness.errors import HarnessError

    from ..agent.prompt import device_info, instructions_markdown, load_brief

    existing = [name for name in FILES if (directory / name).exists()]
    if existing and not force:
        raise UserError(f"{directory}: {', '.join(existing)} exist (use --force to overwrite)")
    problem_path = str(problem.resolve())
    try:
        brief = load_brief(problem_path)
    except HarnessError as exc:
        raise UserError(str(exc)) from None
    info = device_info(device, backend)
    text = instructions_markdown(brief, backend, info, target, problem_path)
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("CLAUDE.md", "AGENTS.md"):
        (directory / name).write_text(text + "\n")
    (directory / ".mcp.json").write_text(
        json.dumps(mcp_config(problem_path, backend, device, index_dir, chroma_url), indent=2)
        + "\n"
    )
    for name in FILES:
        click.echo(str(directory / name))
    click.echo(f"next: cd {directory} && claude   (or point any MCP client at .mcp.json)", err=True)
    return 0


def mcp_config(
    problem: str,
    backend: str,
    device: str | None,
    index_dir: str | None,
    chroma_url: str | None,
) -> dict[str, Any]:
    """The ``.mcp.json`` entry that starts ``ctxkernel mcp`` with check_kernel on."""
    command, args = _ctxkernel_command()
    args += ["mcp", "--problem", problem, "--backend", backend]
    if device:
        args += ["--device", device]
    if index_dir:
        args += ["--index-dir", str(Path(index_dir).resolve())]
    if chroma_url:
        args += ["--chroma-url", chroma_url]
    server: dict[str, Any] = {"command": command, "args": args}
    passed = (envvars.CTXKERNEL_HOME, envvars.CTXKERNEL_INDEX_DIR)  # as set, unexpanded
    env = {var.name: value for var in passed if (value := var.raw())}
    if env:
        server["env"] = env
    return {"mcpServers": {"ctxkernel": server}}


def _ctxkernel_command() -> tuple[str, list[str]]:
    """This installation's ``ctxkernel`` (the client may not share our PATH)."""
    beside = Path(sys.executable).parent / "ctxkernel"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside), []
    found = shutil.which("ctxkernel")
    if found:
        return str(Path(found).resolve()), []
    return sys.executable, ["-m", "ctxkernel"]
