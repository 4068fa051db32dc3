"""What a Searcher keeps between searches (``search.ChunkMemo``, the BM25 fields' per-doc
norms) never outlives the index it was read from: after a re-index — in this Workspace or
by another process — a search answers with the new chunks and the new scores, exactly as
a fresh Workspace does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ctxkernel import Workspace

from .conftest import Repo

OLD = "def planted_swizzle_shared_memory_banks(tile, width):"
BODY = '''
def tile_rasterizer_{i}(grid):
    """Walk the output tiles of a grid in a swizzled raster order, step {i}."""
    return [(m, n) for m in range(grid) for n in range(grid)]
'''


def _rewrite(upstream: Repo) -> None:
    """New text in the same file (its chunks' rows are reused) and longer documents (the
    average length the BM25 norms depend on moves)."""
    path = upstream.path / "src/kernels.py"
    text = path.read_text().replace("XOR swizzle", "rotating swizzle")
    text += "".join(BODY.format(i=i) for i in range(6))
    path.write_text(text)
    upstream.commit("rotate the swizzle, add rasterizers")


def _state(ws: Workspace, query: str) -> list[tuple[str, float, str]]:
    return [(h.id, round(h.score, 9), h.chunk.text) for h in ws.search(query, k=10).hits]


def test_search_after_reindex_in_the_same_workspace_reads_the_new_chunks(
    demo_corpus: str, upstream: Repo, tmp_path: Path
) -> None:
    ws = Workspace()
    ws.index(demo_corpus)
    before = ws.search("swizzle shared memory banks", k=5).hits
    assert any("XOR swizzle" in h.chunk.text for h in before)  # the memo now holds them
    _rewrite(upstream)
    ws.index(demo_corpus)
    after = ws.search("swizzle shared memory banks", k=5).hits
    assert not any("XOR swizzle" in h.chunk.text for h in after)
    assert any("rotating swizzle" in h.chunk.text for h in after)
    fresh = Workspace()
    for query in ("swizzle shared memory banks", "tile rasterizer grid", "barrier stage"):
        assert _state(ws, query) == _state(fresh, query), query


def test_search_after_another_process_reindexed_reads_the_new_chunks(
    demo_corpus: str, upstream: Repo
) -> None:
    ws = Workspace()
    ws.index(demo_corpus)
    assert any("XOR swizzle" in h.chunk.text for h in ws.search("swizzle banks").hits)
    _rewrite(upstream)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(
        [sys.executable, "-m", "ctxkernel", "index", demo_corpus, "--json"],
        env=env,
        check=True,
        capture_output=True,
    )
    hits = ws.search("swizzle banks").hits
    assert not any("XOR swizzle" in h.chunk.text for h in hits)
    assert any("rotating swizzle" in h.chunk.text for h in hits)
    fresh = Workspace()
    for query in ("swizzle banks", "tile rasterizer grid"):
        assert _state(ws, query) == _state(fresh, query), query


def test_a_hit_changed_by_its_caller_does_not_change_the_next_search(demo_corpus: str) -> None:
    ws = Workspace()
    ws.index(demo_corpus)
    first = ws.search("swizzle shared memory banks", k=3).hits
    first[0].chunk.text = "scribbled over"
    again = ws.search("swizzle shared memory banks", k=3).hits
    assert again[0].id == first[0].id and again[0].chunk.text != "scribbled over"
