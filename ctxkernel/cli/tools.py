"""``ctxkernel tools``: print the agent tool definitions, or run one tool from the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import UserError
from ..render import json_line
from .common import index_options, json_option, workspace


@click.group("tools", invoke_without_command=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "anthropic", "mcp"]),
    default="text",
    show_default=True,
    help="anthropic: a JSON array for the Messages API `tools` parameter; mcp: the MCP "
    "tools/list form (inputSchema); text: a summary for people.",
)
@click.option(
    "--cache-control",
    is_flag=True,
    help="(anthropic) Mark the last tool with cache_control so the tool list is cached.",
)
@json_option
@click.pass_context
def tools_group(ctx: click.Context, fmt: str, cache_control: bool, as_json: bool) -> int:
    """The tools an agent gets (search, grep, docs, read, list_corpora), defined once for
    the Anthropic API, the MCP server and this command.

    \b
    Examples:
      ctxkernel tools --format anthropic > tools.json
      ctxkernel tools run search --args '{"query": "tl.dot", "k": 3}'
    """
    if ctx.invoked_subcommand is not None:
        return 0
    from ..tools import anthropic_tools, builtin_tools

    tools = builtin_tools()
    if fmt == "anthropic":
        click.echo(json.dumps(anthropic_tools(tools, cache_control=cache_control), indent=2))
    elif fmt == "mcp":
        click.echo(json.dumps([t.to_mcp() for t in tools], indent=2))
    elif as_json:
        for t in tools:
            json_line({"type": "tool", **t.to_anthropic()})
    else:
        for t in tools:
            props = t.input_schema.get("properties", {})
            required = set(t.input_schema.get("required", []))
            params = ", ".join(f"{p}{'' if p in required else '?'}" for p in props)
            click.echo(f"{t.name}({params})")
            first = " ".join(t.description.split("\n\n")[0].split())
            click.echo(f"    {first.split('. ')[0].rstrip('.')}.")
    return 0


@tools_group.command("run")
@click.argument("name")
@click.option(
    "--args",
    "args_json",
    metavar="JSON",
    help='The tool input as a JSON object, e.g. \'{"query": "tl.dot"}\'.',
)
@click.option(
    "--input",
    "input_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Read the tool input (a JSON object) from FILE ('-' for stdin).",
)
@index_options
@json_option
def run_cmd(
    name: str,
    args_json: str | None,
    input_file: str | None,
    index_dir: str | None,
    chroma_url: str | None,
    as_json: bool,
) -> int:
    """Run the tool NAME as an agent would and print its result (exit 2 on an error result).

    \b
    Examples:
      ctxkernel tools run grep --args '{"pattern": "def do_bench", "corpus": "triton"}'
      echo '{"ref": "triton:python/triton/testing.py:1-40"}' | ctxkernel tools run read --input -
    """
    from ..tools import ToolSet

    arguments = _load_arguments(args_json, input_file)
    toolset = ToolSet(lambda: workspace(index_dir, chroma_url))
    result = toolset.call(name, arguments)
    if as_json:
        json_line(
            {
                "type": "tool_result",
                "tool": name,
                "is_error": result.is_error,
                "content": result.text,
            }
        )
        return 2 if result.is_error else 0
    if result.is_error:
        raise UserError(result.text)
    click.echo(result.text)
    return 0


def _load_arguments(args_json: str | None, input_file: str | None) -> Any:
    if args_json is not None and input_file is not None:
        raise UserError("give the tool input with --args or --input, not both")
    if input_file is not None:
        try:
            text = sys.stdin.read() if input_file == "-" else Path(input_file).read_text()
        except OSError as exc:
            raise UserError(f"cannot read {input_file}: {exc.strerror}") from None
    else:
        text = args_json or "{}"
    try:
        return json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise UserError(f"the tool input is not valid JSON: {exc}") from None
