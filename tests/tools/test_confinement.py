"""Query-time reads stay inside the corpus snapshot: an indexed file (or its folder)
swapped for a symlink out of the corpus after indexing, for a hard link to a file outside
it, or for a FIFO, is refused by `show` and the `read` tool and left out by CLI `grep`
(both engines) and the `grep` tool."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from retrieval.conftest import CliResult

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet

from .conftest import DemoIndex

SWAPS = ["file", "folder", "fifo", "hardlink"]
# what the refusal says: a path that leads out, or a path that names another file now
REFUSED = ("resolves outside the corpus", "is another file than the one indexed")


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
    assert len(lines) == 1 and any(r in lines[0] for r in REFUSED), res.err
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
    assert "left out 1 file swapped after indexing for a link or another file" in plain.err


@pytest.mark.parametrize("what", SWAPS)
def test_grep_tool_skips_symlink_swapped_after_index(
    toolset: ToolSet, swapped: Callable[[str], None], what: str
) -> None:
    swapped(what)
    for pattern in ("SECRET", "SECRET|make_tiled_copy|softmax_rows"):
        text = toolset.run("grep", {"pattern": pattern, "corpus": "demo"})
        assert "TOP SECRET" not in text and "copy.hpp" not in text
        assert "left out 1 file swapped after indexing for a link or another file" in text


@pytest.mark.parametrize("what", SWAPS)
def test_read_tool_refuses_symlink_swapped_after_index(
    toolset: ToolSet, swapped: Callable[[str], None], what: str
) -> None:
    swapped(what)
    result = toolset.call("read", {"ref": "demo:include/copy.hpp"})
    assert result.is_error and any(r in result.text for r in REFUSED), result.text
    assert "TOP SECRET" not in result.text


def test_show_refuses_an_indexed_file_given_a_new_name_since(
    demo_index: DemoIndex, ws: Workspace, run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """A link count that grew: the indexed file got another name (outside the corpus)
    after indexing, through which it may be rewritten; a count that fell is allowed."""
    entry = ws.store.cache("demo").file("include/copy.hpp")
    assert entry is not None and entry.local
    idx = ("--index-dir", str(demo_index.index_dir))
    alias = tmp_path / "alias.hpp"
    os.link(entry.local, alias)
    try:
        res = run_cli("show", "demo:include/copy.hpp", *idx)
        assert res.code == 2 and "is another file than the one indexed" in res.err, res
    finally:
        alias.unlink()
    assert run_cli("show", "demo:include/copy.hpp", *idx).code == 0
