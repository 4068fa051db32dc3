"""A pasted traceback is a query: the cap on a query's length (once 2,000 characters,
shorter than many tracebacks) leaves room for one, and every mode answers it — hybrid
and lexical by the error its last line names."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import Workspace
from ctxkernel.queries import MAX_QUERY_CHARS
from ctxkernel.tools import ToolSet

from .conftest import CliResult, Repo

RAISES_PY = '''\
def dot(lhs, rhs):
    """The matrix product of two blocks."""
    if lhs.shape[-1] != rhs.shape[-2]:
        raise ValueError(
            f"First input shape ({lhs.shape}) and second input shape {rhs.shape} are not "
            "compatible for matmul (second index of first shape must equal first index of "
            "second shape)"
        )
    return _product(lhs, rhs)
'''


def traceback_text(chars: int) -> str:
    """A Triton-style traceback of about ``chars`` characters: many frames, then the error."""
    last = (
        "triton.compiler.errors.CompilationError: at 26:16: ValueError('First input shape "
        "(32, 16) and second input shape (32, 16) are not compatible for matmul (second "
        "index of first shape must equal first index of second shape)')"
    )
    frames = ["Traceback (most recent call last):"]
    i = 0
    while sum(len(f) + 1 for f in frames) + len(last) < chars:
        i += 1
        frames.append(f'  File "/home/me/proj/launch_{i}.py", line {10 + i}, in run_{i}')
        frames.append(f"    out = kernel_{i}[grid](a, b, c, M, N, K, BLOCK_M={16 * i})")
    return "\n".join([*frames, last])


@pytest.fixture
def long_ws(demo_corpus: str, upstream: Repo, tmp_path: Path) -> Workspace:
    upstream.write("src/semantic.py", RAISES_PY)
    upstream.commit("a raise site")
    ws = Workspace(tmp_path / "index")
    ws.index(demo_corpus)
    return ws


def test_a_pasted_traceback_longer_than_2000_chars_is_searched_in_every_mode(
    long_ws: Workspace, run_cli: Callable[..., CliResult]
) -> None:
    query = traceback_text(15_000)
    assert 14_000 < len(query) <= MAX_QUERY_CHARS
    index = ["--index-dir", str(long_ws.store.index_dir)]
    for mode in ("hybrid", "lexical", "dense"):
        res = run_cli("search", query, "--mode", mode, "-k", "3", "--json", *index)
        assert res.code == 0 and "Traceback" not in res.err, (mode, res.err)
        docs = [json.loads(line) for line in res.out.splitlines()]
        hits = [d for d in docs if d["type"] == "hit"]
        assert hits and docs[-1]["type"] == "summary", mode
        if mode != "dense":  # read by its message: the raise site first
            assert hits[0]["path"] == "src/semantic.py", (mode, [h["id"] for h in hits])
    text = ToolSet(long_ws).run("search", {"query": query, "k": 3})
    assert text.startswith("3 results for ") and "src/semantic.py" in text


def test_a_query_past_the_cap_is_refused_in_one_line(run_cli: Callable[..., CliResult]) -> None:
    res = run_cli("search", "x" * (MAX_QUERY_CHARS + 1))
    lines = res.err.strip().splitlines()
    assert res.code == 2 and len(lines) == 1 and f"longer than {MAX_QUERY_CHARS}" in lines[0]
