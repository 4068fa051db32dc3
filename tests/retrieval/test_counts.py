"""Counts read in the right number: "1 results", "1 blocks in 1 files" were printed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctxkernel import Workspace
from ctxkernel.render import counted
from ctxkernel.tools import ToolSet

from .conftest import CliResult


def test_counted_says_one_thing_and_many_things() -> None:
    assert counted(1, "result") == "1 result"
    assert counted(0, "result") == "0 results"
    assert counted(2, "more corpus", "more corpora") == "2 more corpora"
    assert counted(1, "more corpus", "more corpora") == "1 more corpus"


def test_one_result_and_one_block_in_one_file_are_singular(
    demo_corpus: str, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    index = ["--index-dir", str(tmp_path / "index")]
    indexed = run_cli("index", demo_corpus, *index)
    assert indexed.code == 0, indexed.err
    res = run_cli("search", "softmax_rows", "-k", "1", *index)
    assert res.code == 0 and res.err.startswith("1 result in "), res.err
    res = run_cli("grep", "def softmax_rows", "--corpus", "demo", "--path", "src/*", *index)
    assert res.code == 0 and res.err.startswith("1 block in 1 file ("), res.err
    tools = ToolSet(Workspace(tmp_path / "index"))
    assert tools.run("search", {"query": "softmax_rows", "k": 1}).startswith("1 result for ")
    text = tools.run("grep", {"pattern": "def softmax_rows", "corpus": "demo", "path": "src/*"})
    assert text.startswith("1 matching line in 1 block for ") and "(1 file)" in text
