"""Fuzz every agent tool's arguments, as a model (or an MCP client) could send them: the
schema's keys with values of any JSON type, unknown keys, lone surrogates, huge and empty
strings, numbers out of range. Every call comes back as a result — an `is_error` one for
bad input, never an internal error — whose text is valid UTF-8 under the token cap, and
nothing is written outside the index."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet, builtin_tools, run_tool_use
from ctxkernel.tools import tokens as tool_tokens
from ctxkernel.tools.base import MAX_MAX_TOKENS

from .conftest import Sandbox

EXAMPLES = int(os.environ.get("CTXKERNEL_FUZZ_EXAMPLES", "12")) * 2
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

TEXT = st.one_of(
    st.sampled_from(["demo", "make_tiled_copy", "demo:src/kernels.py:1-3", "(a+)+$", "**", ""]),
    st.text(max_size=20),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.integers(min_value=1000, max_value=100_000).map(lambda n: "q" * n),
)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)


def _arguments(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    keys = list(schema.get("properties", {}))
    known = (
        st.dictionaries(st.sampled_from(keys), JSON, max_size=len(keys)) if keys else st.just({})
    )
    extra = st.dictionaries(TEXT, JSON, max_size=2)
    return st.one_of(
        known,
        st.tuples(known, extra).map(lambda kv: {**kv[1], **kv[0]}),
        JSON,  # not an object at all
    )


def _check(text: str, is_error: bool) -> None:
    text.encode("utf-8")  # strict: a reply that can always be sent
    assert "internal error" not in text, text[:500]
    assert "Traceback" not in text
    assert tool_tokens.count([text])[0] <= MAX_MAX_TOKENS
    if is_error:
        assert text.strip()


@pytest.mark.parametrize("tool", [t.name for t in builtin_tools()])
def test_fuzz_tool_arguments(sandbox: Sandbox, tool: str) -> None:
    toolset = ToolSet(Workspace(sandbox.index))
    schema = toolset.get(tool).input_schema

    @FUZZ
    @given(arguments=_arguments(schema))
    def one(arguments: Any) -> None:
        before = sandbox.files()
        result = toolset.call(tool, arguments)
        _check(result.text, result.is_error)
        # the same call as a Messages API tool_use block whose input is a JSON string
        block = {"type": "tool_use", "id": "t1", "name": tool, "input": json.dumps(arguments)}
        reply = run_tool_use(toolset, block)
        _check(reply["content"], reply["is_error"])
        assert sandbox.files() == before

    one()


@FUZZ
@given(name=TEXT)
def test_fuzz_tool_names(name: str) -> None:
    result = ToolSet(Workspace("/nonexistent-index")).call(name, {})
    if name not in {t.name for t in builtin_tools()}:
        assert result.is_error and "unknown tool" in result.text
    _check(result.text, result.is_error)
