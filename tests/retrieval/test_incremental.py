"""A re-index after a small change does small work: files whose size and mtime did not move
are not read, and the BM25 and vector snapshots are updated, not rebuilt, to the state a
fresh index of the same files has."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ctxkernel import Workspace

from .conftest import Repo


def test_unchanged_files_are_not_read_again(
    demo_corpus: str, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxkernel.indexer as indexer

    monkeypatch.setattr(indexer, "STAT_TRUST_NS", 0)  # trust stats taken just now
    ws = Workspace()
    ws.index(demo_corpus)
    read: list[str] = []
    real = indexer.read_text
    monkeypatch.setattr(indexer, "read_text", lambda f, n: read.append(f.path) or real(f, n))
    again = ws.index(demo_corpus)
    assert read == [] and again.files_unchanged == 3
    guide = upstream.path / "docs/guide.md"
    guide.write_text(guide.read_text().replace("Some words", "Other words"))  # same size
    upstream.commit("same size, new words")
    report = ws.index(demo_corpus)
    assert read == ["docs/guide.md"] and report.files_changed == 1
    hits = ws.search("other words", mode="lexical").hits
    assert any(h.chunk.path == "docs/guide.md" and "Other words" in h.chunk.text for h in hits)


def test_snapshots_after_updates_match_a_fresh_index(demo_corpus: str, upstream: Repo) -> None:
    ws = Workspace()
    ws.index(demo_corpus)
    for i in range(3):  # several small updates, each on the last snapshots
        upstream.write(f"src/step_{i}.py", f"def step_{i}():\n    '''Step {i} swizzles.'''\n")
        if i == 1:
            upstream.remove("include/copy.hpp")
        upstream.commit(f"step {i}")
        ws.update(demo_corpus)
    fresh = Workspace(index_dir=str(Path(os.environ["CTXKERNEL_HOME"]) / "fresh"))
    fresh.index(demo_corpus, source=str(upstream.path))

    def state(w: Workspace) -> tuple[dict[str, list[float]], dict[str, float]]:
        cache = w.store.cache(demo_corpus)
        dense = cache.dense()
        ids = {int(r): c.id for r, c in cache.chunks_by_rows([int(r) for r in dense.rows]).items()}
        vectors = {
            ids[int(r)]: [round(float(x), 4) for x in v[:8]]
            for r, v in zip(dense.rows, dense.matrix, strict=True)
        }
        index = cache.bm25()
        scores = index.scores("body", ["swizzl", "step", "tile"])
        lex = {
            cache.chunks_by_rows([int(r)])[int(r)].id: round(float(s), 5)
            for r, s in zip(index.rows, scores, strict=True)
        }
        return vectors, lex

    got, want = state(ws), state(fresh)
    assert got == want
    assert len(got[0]) == Workspace().store.cache(demo_corpus).count()
    norms = np.linalg.norm(np.asarray(ws.store.cache(demo_corpus).dense().matrix), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)


def test_reindex_from_another_copy_keeps_the_search_rows(
    demo_corpus: str, upstream: Repo, tmp_path: Path
) -> None:
    """The same commit read from another place (a second clone, a mirror): every file's
    content is unchanged, only where it lives moves. Its chunks were re-inserted under new
    rows that the lexical and vector snapshots (not rebuilt) did not know: hits vanished."""
    import shutil

    ws = Workspace()
    ws.index(demo_corpus)
    queries = ("copy atoms", "tiny kernels", "swizzle")
    before = {
        (q, mode): [h.to_json() for h in ws.search(q, mode=mode).hits]
        for q in queries
        for mode in ("lexical", "dense", "hybrid")
    }
    assert any(before.values())
    copy = tmp_path / "elsewhere"
    shutil.copytree(upstream.path, copy)
    report = ws.index(demo_corpus, source=str(copy))
    assert report.files_changed == 0
    after = {
        (q, mode): [h.to_json() for h in ws.search(q, mode=mode).hits]
        for q in queries
        for mode in ("lexical", "dense", "hybrid")
    }
    assert after == before
    cache = ws.store.cache(demo_corpus)
    assert all(not e.local.startswith(str(upstream.path)) for e in cache.files().values())
