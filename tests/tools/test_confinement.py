"""Query-time reads stay inside the corpus snapshot: an indexed file (or its folder)
swapped for a symlink out of the corpus after indexing, or for a FIFO, is refused by
`show` and the `read` tool and left out by CLI `grep` (both engines) and the `grep` tool."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from retrieval.conftest import CliResult

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet

from .conftest import DemoIndex

SWAPS = ["file", "folder", "fifo"]


@pytest.mark.parametrize("what", SWAPS)
def test_show_refuses_symlink_swapped_after_index(
    demo_index: DemoIndex,
    ws: Workspace,
    swapped: Callable[[str], None],
    run_cli: Callable[..., CliResult],
    what: str,
) -> None:
    idx = ("--index-dir", str(demo_index.index_dir))
    assert "make_tiled_copy" in run_cli("show", "demo:include/copy.hpp", *idx).out
    swapped(what)
    res = run_cli("show", "demo:include/copy.hpp", *idx)
    assert res.code == 2 and "TOP SECRET" not in res.out
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "resolves outside the corpus" in lines[0], res.err
    assert "ctxkernel index demo" in lines[0]
    # the other files read as before
    assert "softmax_rows" in run_cli("show", "demo:src/kernels.py", *idx).out


@pytest.mark.parametrize("engine", ["rg", "python"])
@pytest.mark.parametrize("what", SWAPS)
def test_cli_grep_skips_symlink_swapped_after_index(
    demo_index: DemoIndex,
    ws: Workspace,
    swapped: Callable[[str], None],
    run_cli: Callable[..., CliResult],
    engine: str,
    what: str,
) -> None:
    idx = ("--index-dir", str(demo_index.index_dir), "--engine", engine)
    swapped(what)
    secret = run_cli("grep", "TOP SECRET", "--corpus", "demo", *idx)
    assert secret.code == 1 and "TOP SECRET" not in secret.out
    res = run_cli("grep", "make_tiled_copy|softmax_rows", "--corpus", "demo", "--json", *idx)
    rows = [json.loads(line) for line in res.out.splitlines()]
    assert {r["path"] for r in rows if r["type"] == "hit"} == {"src/kernels.py"}
    assert rows[-1]["refused"] == 1 and rows[-1]["engine"] == engine
    plain = run_cli("grep", "softmax_rows", "--corpus", "demo", *idx)
    assert "left out 1 files that now resolve outside the corpus" in plain.err


@pytest.mark.parametrize("what", SWAPS)
def test_grep_tool_skips_symlink_swapped_after_index(
    toolset: ToolSet, swapped: Callable[[str], None], what: str
) -> None:
    swapped(what)
    for pattern in ("SECRET", "SECRET|make_tiled_copy|softmax_rows"):
        text = toolset.run("grep", {"pattern": pattern, "corpus": "demo"})
        assert "TOP SECRET" not in text and "copy.hpp" not in text
        assert "left out 1 files that now resolve outside the corpus" in text


@pytest.mark.parametrize("what", SWAPS)
def test_read_tool_refuses_symlink_swapped_after_index(
    toolset: ToolSet, swapped: Callable[[str], None], what: str
) -> None:
    swapped(what)
    result = toolset.call("read", {"ref": "demo:include/copy.hpp"})
    assert result.is_error and "resolves outside the corpus" in result.text
    assert "TOP SECRET" not in result.text
