"""Tool definitions without an index: schemas are valid JSON Schema and accept/reject what
they should, the Anthropic and MCP forms, the registry, grep's pattern guard, the CLI
listing, and errors as results (never exceptions) from run_tool_use."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from anthropic.types import ToolUseBlock
from retrieval.conftest import CliResult

from ctxkernel import Workspace, tools
from ctxkernel.tools import (
    Tool,
    ToolError,
    ToolSet,
    anthropic_tools,
    builtin_tools,
    check_grep_pattern,
    register,
    run_tool_use,
)

NAMES = ["search", "grep", "docs", "read", "list_corpora", "related"]


def _no_workspace() -> Workspace:
    raise AssertionError("these tests need no index")


def test_the_builtin_tools_are_registered_in_order() -> None:
    assert [t.name for t in builtin_tools()] == NAMES


@pytest.mark.parametrize("tool", builtin_tools(), ids=lambda t: t.name)
def test_schema_is_valid_draft_2020_12_and_draft_7(tool: Tool) -> None:
    jsonschema.Draft202012Validator.check_schema(tool.input_schema)
    jsonschema.Draft7Validator.check_schema(tool.input_schema)
    schema = tool.input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert set(schema.get("required", [])) <= set(schema["properties"])
    assert "max_tokens" in schema["properties"]
    for name, prop in schema["properties"].items():
        assert prop.get("description") or name in ("ignore_case",), (tool.name, name)
        if "default" in prop:  # every default is itself valid input
            jsonschema.Draft202012Validator(prop).validate(prop["default"])
    # written for a model: when to use it, what comes back, an example
    assert len(tool.description) > 150 and "Example" in tool.description
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool.name)


GOOD: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "tl.dot"}),
    ("search", {"query": "tl.dot", "arch": "sm_90"}),
    ("related", {"ref": "cutlass:include/cute/arch/mma_sm90_gmma.hpp:1-40", "arch": "sm100a"}),
    ("search", {"query": "x", "corpus": ["a", "b"], "k": 50, "mode": "dense", "kind": "doc",
                "path": "include/**", "language": "cpp", "lines_per_hit": 1, "max_tokens": 200}),
    ("search", {"query": "x", "corpus": "cutlass"}),
    ("grep", {"pattern": "x", "corpus": "c", "timeout_s": 0.5, "context": 0, "ignore_case": True}),
    ("docs", {"topic": "wgmma.mma_async", "alternatives": 0, "corpus": "ptx"}),
    ("read", {"ref": "c:p:1-2", "start_line": 3, "end_line": 4}),
    ("list_corpora", {}),
]  # fmt: skip

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("search", {}, "'query' is a required property"),
    ("search", {"query": ""}, "query"),
    ("search", {"query": 3}, "query"),
    ("search", {"query": "x", "k": 0}, "k: 0 is less than the minimum of 1"),
    ("search", {"query": "x", "k": 51}, "k"),
    ("search", {"query": "x", "mode": "fuzzy"}, "mode"),
    ("search", {"query": "x", "kind": "blog"}, "kind"),
    ("search", {"query": "x", "arch": "hopper"}, "arch"),
    ("related", {}, "'ref' is a required property"),
    ("docs", {"topic": "wgmma.mma_async", "arch": "sm90x"}, "arch"),
    ("search", {"query": "x", "max_tokens": 10}, "max_tokens"),
    ("search", {"query": "x", "corpus": []}, "corpus"),
    ("search", {"query": "x", "corpus": 7}, "expected a string or a list of strings"),
    ("search", {"qurey": "x"}, "'qurey' was unexpected"),
    ("grep", {"pattern": "x"}, "'corpus' is a required property"),
    ("grep", {"pattern": "x", "corpus": "c", "timeout_s": 0}, "timeout_s"),
    ("grep", {"pattern": "x", "corpus": "c", "timeout_s": 600}, "timeout_s"),
    ("grep", {"pattern": "x", "corpus": "c", "context": -1}, "context"),
    ("grep", {"pattern": "x", "corpus": "c", "ignore_case": "yes"}, "ignore_case"),
    ("docs", {"topic": ""}, "topic"),
    ("read", {"ref": "c:p", "start_line": 0}, "start_line"),
    ("list_corpora", {"verbose": True}, "'verbose' was unexpected"),
]


@pytest.mark.parametrize(("name", "args"), GOOD)
def test_good_inputs_validate(name: str, args: dict[str, Any]) -> None:
    tool = ToolSet(_no_workspace).get(name)
    jsonschema.validate(args, tool.input_schema, cls=jsonschema.Draft202012Validator)
    filled = tool.validate(args)
    for key, prop in tool.input_schema["properties"].items():
        if "default" in prop:
            assert filled[key] == args.get(key, prop["default"])


@pytest.mark.parametrize(("name", "args", "message"), BAD)
def test_bad_inputs_are_tool_errors(name: str, args: dict[str, Any], message: str) -> None:
    tool = ToolSet(_no_workspace).get(name)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(args, tool.input_schema, cls=jsonschema.Draft202012Validator)
    with pytest.raises(ToolError, match=re.escape(message)) as err:
        tool.validate(args)
    assert str(err.value).startswith(f"{name}: invalid input: ")


@pytest.mark.parametrize(
    "pattern",
    [r"(a+)+", r"(\w*)*", r"((a+))+$", r"(?:x+y)+", r"(\w+\.)+\w+", r"(a|b+)*", r"(a{2,})+"],
)
def test_grep_rejects_nested_quantifiers(pattern: str) -> None:
    with pytest.raises(ToolError, match="nested quantifiers"):
        check_grep_pattern(pattern)


@pytest.mark.parametrize(
    "pattern", [r"def do_bench", r"make_tiled_copy\(", r"(ab)+", r"[\w.]+", r"x{2,}\s*y+", r"a?b*"]
)
def test_grep_accepts_plain_patterns(pattern: str) -> None:
    check_grep_pattern(pattern)


def test_grep_bad_regex_is_a_clear_error() -> None:
    with pytest.raises(ToolError, match="bad regex"):
        check_grep_pattern("(unclosed")


def test_anthropic_tools_format() -> None:
    defs = anthropic_tools()
    assert [d["name"] for d in defs] == NAMES
    for d in defs:
        assert set(d) == {"name", "description", "input_schema"}
    json.dumps(defs)  # plain JSON, ready for the API
    cached = anthropic_tools(cache_control=True)
    assert cached[-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in d for d in cached[:-1])
    assert "cache_control" not in anthropic_tools()[-1]  # the flag does not stick


def _echo(ws: Any, args: dict[str, Any]) -> str:
    return f"echo {args['text']}"


ECHO = Tool(
    name="echo",
    description='Say it back. Example: {"text": "hi"}',
    input_schema={
        "type": "object",
        "properties": {"text": {"type": "string", "description": "What to say."}},
        "required": ["text"],
        "additionalProperties": False,
    },
    handler=_echo,
    needs_workspace=False,
)


def test_a_toolset_takes_extra_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    toolset = ToolSet(_no_workspace).register(ECHO)
    assert toolset.names() == [*NAMES, "echo"]
    assert [d["name"] for d in anthropic_tools(toolset)][-1] == "echo"
    assert toolset.run("echo", {"text": "hi"}) == "echo hi"
    assert "echo" not in ToolSet(_no_workspace)
    with pytest.raises(ValueError, match="already has"):
        toolset.register(ECHO)
    toolset.register(ECHO, replace=True)
    bad_schema = Tool("bad", "d", {"type": "object", "properties": {"x": {"type": "nope"}}}, _echo)
    with pytest.raises(ValueError, match="invalid input schema"):
        toolset.register(bad_schema)

    # register() adds to every ToolSet made afterwards
    monkeypatch.setattr(tools.base, "_REGISTRY", dict(tools.base._REGISTRY))
    register(ECHO)
    assert "echo" in ToolSet(_no_workspace)
    with pytest.raises(ValueError, match="already registered"):
        register(ECHO)


def test_errors_come_back_as_results_never_exceptions() -> None:
    def boom(ws: Any, args: dict[str, Any]) -> str:
        raise RuntimeError("kaput")

    broken = Tool("broken", "Fails. Example: {}", {"type": "object", "properties": {}}, boom, False)
    toolset = ToolSet(_no_workspace, tools=[broken, ECHO])

    result = toolset.call("broken", {})
    assert result.is_error and "internal error: RuntimeError: kaput" in result.text
    assert toolset.call("echo", ["not", "an", "object"]).is_error  # type: ignore[arg-type]

    block = ToolUseBlock(id="toolu_01", name="nope", input={}, type="tool_use")
    out = run_tool_use(toolset, block)
    assert out == {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": "unknown tool 'nope' (tools: broken, echo)",
        "is_error": True,
    }
    out = run_tool_use(toolset, {"type": "tool_use", "id": "t2", "name": "echo", "input": "{"})
    assert out["is_error"] and "not valid JSON" in out["content"]
    out = run_tool_use(toolset, {"type": "tool_use", "id": "t3", "name": "echo", "input": {}})
    assert out["is_error"] and "'text' is a required property" in out["content"]
    ok = run_tool_use(
        toolset, {"type": "tool_use", "id": "t4", "name": "echo", "input": {"text": "a"}}
    )
    assert ok == {
        "type": "tool_result",
        "tool_use_id": "t4",
        "content": "echo a",
        "is_error": False,
    }
    with pytest.raises(ValueError, match="not a tool_use block"):
        run_tool_use(toolset, {"type": "text", "text": "hi"})


def test_cli_prints_tools_for_anthropic_and_mcp(run_cli: Callable[..., CliResult]) -> None:
    anthropic = run_cli("tools", "--format", "anthropic")
    assert anthropic.code == 0
    assert json.loads(anthropic.out) == anthropic_tools()
    cached = json.loads(run_cli("tools", "--format", "anthropic", "--cache-control").out)
    assert cached[-1]["cache_control"] == {"type": "ephemeral"}
    mcp = json.loads(run_cli("tools", "--format", "mcp").out)
    assert [t["name"] for t in mcp] == NAMES and all("inputSchema" in t for t in mcp)
    lines = [json.loads(x) for x in run_cli("tools", "--json").out.splitlines()]
    assert [x["type"] for x in lines] == ["tool"] * len(NAMES)
    text = run_cli("tools").out
    assert text.startswith("search(query, corpus?, k?")


def test_cli_run_reports_bad_input_in_one_line(run_cli: Callable[..., CliResult]) -> None:
    bad_json = run_cli("tools", "run", "search", "--args", "{nope")
    assert bad_json.code == 2 and "not valid JSON" in bad_json.err
    unknown = run_cli("tools", "run", "nope")
    assert unknown.code == 2 and unknown.err.strip() == (
        "ctxkernel: error: unknown tool 'nope' (tools: search, grep, docs, read, list_corpora, related)"
    )
    invalid = run_cli("tools", "run", "search", "--args", '{"k": 3}', "--json")
    assert invalid.code == 2
    assert json.loads(invalid.out)["is_error"] is True
