"""Each retrieval query is declared once (``ctxkernel.queries``): the CLI commands and the
agent tools generated from it agree on every shared parameter's default, range and
choices, neither side hand-writes a parameter of its own, and the defaults act the same
through both. Search's ``-k`` was once 10 on the CLI and 8 in the tool."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import click
import pytest
from retrieval.conftest import CliResult

from ctxkernel import Workspace
from ctxkernel.cli.docs import docs_cmd
from ctxkernel.cli.retrieval import grep_cmd, related_cmd, search_cmd, show_cmd
from ctxkernel.queries import MAX_QUERY_CHARS, QUERIES, DocsQuery, GrepQuery, SearchQuery
from ctxkernel.tools import ToolSet, builtin_tools
from harness.optionspec import Declared, declared, from_cli, from_tool, tool_schema

# tool name -> the CLI command built from the same query
COMMANDS: dict[str, click.Command] = {
    "search": search_cmd,
    "grep": grep_cmd,
    "docs": docs_cmd,
    "read": show_cmd,
    "related": related_cmd,
}
# what a command adds that is about the command, not the query
COMMAND_ONLY = {"index_dir", "chroma_url", "as_json", "plain", "embed"}  # workspace options


def _shared(tool: str) -> list[tuple[Declared, click.Parameter, dict[str, Any]]]:
    """(declared field, its click parameter, its tool property) for each field on both."""
    params = {p.name: p for p in COMMANDS[tool].params}
    props = next(t for t in builtin_tools() if t.name == tool).input_schema["properties"]
    return [
        (item, params[item.dest], props[item.name])
        for item in declared(QUERIES[tool])
        if item.spec.cli and item.spec.tool
    ]


def _click_bounds(param: click.Parameter) -> tuple[Any, Any]:
    kind = param.type
    if isinstance(kind, click.IntRange | click.FloatRange):
        return kind.min, kind.max
    return None, None


@pytest.mark.parametrize("tool", list(COMMANDS))
def test_shared_parameters_agree_on_default_range_and_choices(tool: str) -> None:
    shared = _shared(tool)
    assert len(shared) >= 1
    for item, param, prop in shared:
        where = f"{tool}.{item.name}"
        # the default: the dataclass's, the CLI's and the tool's are one value
        cli_default = param.get_default(click.Context(COMMANDS[tool]))
        if item.spec.many:
            assert tuple(cli_default or ()) == item.default == (), where
            assert "default" not in prop, where
        elif item.required:
            assert param.required and prop.get("default") is None, where
        else:
            assert cli_default == item.default == prop.get("default"), where
        # the range
        low, high = _click_bounds(param)
        assert low == prop.get("minimum", prop.get("exclusiveMinimum")), where
        assert high == prop.get("maximum"), where
        if "exclusiveMinimum" in prop:
            assert isinstance(param.type, click.FloatRange) and param.type.min_open, where
        # the choices
        if isinstance(param.type, click.Choice):
            assert list(param.type.choices) == prop["enum"], where
        else:
            assert "enum" not in prop, where


@pytest.mark.parametrize("tool", list(QUERIES))
def test_tool_schema_is_the_declaration(tool: str) -> None:
    """Nothing hand-written: the tool's properties are exactly the declared fields it offers."""
    schema = next(t for t in builtin_tools() if t.name == tool).input_schema
    assert schema == tool_schema(QUERIES[tool])
    offered = [item.name for item in declared(QUERIES[tool]) if item.spec.tool]
    assert list(schema["properties"]) == offered
    assert schema.get("required", []) == [i.name for i in declared(QUERIES[tool]) if i.required]


@pytest.mark.parametrize("tool", list(COMMANDS))
def test_command_parameters_are_the_declaration(tool: str) -> None:
    """A command declares no query parameter of its own beside the generated ones."""
    names = {p.name for p in COMMANDS[tool].params} - COMMAND_ONLY - {"help"}
    assert names == {i.dest for i in declared(QUERIES[tool]) if i.spec.cli}


def test_search_k_default_is_one_value_everywhere() -> None:
    """The drift found, checked in every place a default of k lives."""
    params = {p.name: p for p in search_cmd.params}
    schema = next(t for t in builtin_tools() if t.name == "search").input_schema
    library = inspect.signature(Workspace.search).parameters["k"].default
    declared_k = SearchQuery(query="x").k
    assert params["k"].get_default(click.Context(search_cmd)) == declared_k
    assert schema["properties"]["k"]["default"] == declared_k == library
    docs_library = inspect.signature(Workspace.docs).parameters["alternatives"].default
    assert DocsQuery(topic="x").alternatives == docs_library


def test_cli_and_tool_values_build_the_same_query() -> None:
    from_command = from_cli(
        GrepQuery,
        {"pattern": "a.b", "corpus": "c", "ignore_case": True, "path": None, "context": 3,
         "max_matches": 7, "timeout_s": 2.5, "engine": "auto"},
    )  # fmt: skip
    from_call = from_tool(
        GrepQuery,
        {"pattern": "a.b", "corpus": "c", "ignore_case": True, "context": 3,
         "max_matches": 7, "timeout_s": 2.5, "max_tokens": 4000},
    )  # fmt: skip
    assert from_command == from_call
    one = from_tool(SearchQuery, {"query": "q", "corpus": "cutlass"})
    many = from_cli(SearchQuery, {"query": "q", "corpora": ("cutlass",)})
    assert one == many and one.corpus == ("cutlass",)


def test_the_defaults_act_the_same_through_cli_and_tool(
    toolset: ToolSet, run_cli: Callable[..., CliResult], ws: Workspace
) -> None:
    """No k, no context, no max-count given: the CLI and the tool return as many hits
    (the demo corpus has more than either default would need)."""
    index = ["--index-dir", str(ws.settings.index_dir)]
    query = "pipeline stage wait on the barrier then copy a tile"
    cli = run_cli("search", query, "--json", *index)
    assert cli.code == 0, cli.err
    cli_hits = [d for d in map(json.loads, cli.out.splitlines()) if d["type"] == "hit"]
    text = toolset.run("search", {"query": query, "max_tokens": 20000})
    assert text.startswith(f"{len(cli_hits)} results for ")
    assert len(cli_hits) == SearchQuery(query=query).k

    cli = run_cli("grep", "buf\\[j\\]", "--corpus", "demo", "--json", *index)
    assert cli.code == 0, cli.err
    blocks = [d for d in map(json.loads, cli.out.splitlines()) if d["type"] == "hit"]
    text = toolset.run("grep", {"pattern": "buf\\[j\\]", "corpus": "demo", "max_tokens": 20000})
    assert text.startswith(f"{sum(len(b['matches']) for b in blocks)} matching lines in ")
    context = GrepQuery(pattern="x", corpus="c").context
    first = blocks[0]
    assert min(first["matches"]) - first["start_line"] == context


@pytest.mark.parametrize(
    ("tool", "args", "argv", "fragment"),
    [
        ("search", {"query": "x" * (MAX_QUERY_CHARS + 1)}, ("search", "x" * (MAX_QUERY_CHARS + 1)),
         f"longer than {MAX_QUERY_CHARS}"),
        ("search", {"query": ""}, ("search", ""), "QUERY"),
        ("search", {"query": "x", "k": 51}, ("search", "x", "-k", "51"), "-k"),
        ("grep", {"pattern": "x", "corpus": "demo", "timeout_s": 31},
         ("grep", "x", "-c", "demo", "--timeout", "31"), "--timeout"),
        ("grep", {"pattern": "x", "corpus": "demo", "context": 21},
         ("grep", "x", "-c", "demo", "-C", "21"), "--context"),
        ("docs", {"topic": "t", "alternatives": -1}, ("docs", "t", "-n", "-1"), "-n"),
        ("read", {"ref": "demo:a", "start_line": 0},
         ("show", "demo:a", "--start-line", "0"), "--start-line"),
        ("search", {"query": "x", "arch": "hopper"}, ("search", "x", "--arch", "hopper"),
         "--arch"),
        ("related", {"ref": "demo:a:1-2", "arch": "sm90x"},
         ("related", "demo:a:1-2", "--arch", "sm90x"), "--arch"),
    ],
)  # fmt: skip
def test_a_value_past_a_limit_is_refused_by_both(
    run_cli: Callable[..., CliResult],
    tool: str,
    args: dict[str, Any],
    argv: tuple[str, ...],
    fragment: str,
) -> None:
    """The limits are declared once too: what the tool refuses the CLI refuses, as one
    line and exit 2, before any index is opened."""
    result = ToolSet(lambda: pytest.fail("no index is needed")).call(tool, args)
    assert result.is_error and result.text.startswith(f"{tool}: invalid input: ")
    res = run_cli(*argv)
    lines = res.err.strip().splitlines()
    assert res.code == 2 and len(lines) == 1 and fragment in lines[0], res
