"""A search over several corpora ranks them together: each ranker's scores decide the
merged order, so a tiny corpus's weak best match does not rank with a bigger corpus's
real one (they used to be ranked apart and merged by rank)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import Workspace

from .conftest import CliResult, Repo, define_corpus

# two files that say "make", "tiled" and "copy" but never name make_tiled_copy
NOTES = {
    "docs/notes.md": "# Notes\n\nHow to make a copy of a tiled layout: make the copy first, "
    "then tile it.\nEach copy of the tile keeps its layout.\n",
    "docs/todo.md": "# Todo\n\nMake the tiled kernels faster; copy less.\n",
}


@pytest.fixture
def two_corpora(isolated_home: Path, demo_corpus: str, tmp_path: Path) -> Workspace:
    import git

    path = tmp_path / "notes"
    notes = Repo(path, git.Repo.init(path, initial_branch="main"))
    for rel, text in NOTES.items():
        notes.write(rel, text)
    notes.commit("notes")
    define_corpus(isolated_home, "notes", str(path))
    ws = Workspace()
    ws.index(demo_corpus)
    ws.index("notes")
    return ws


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_tiny_corpus_weak_hits_do_not_outrank_a_definition(
    two_corpora: Workspace, run_cli: Callable[..., CliResult], mode: str
) -> None:
    res = run_cli("search", "make_tiled_copy", "--mode", mode, "-k", "1", "--json")
    hit = json.loads(res.out.splitlines()[0])
    assert hit["type"] == "hit" and hit["corpus"] == "demo", hit["id"]
    assert "make_tiled_copy" in hit["text"]
    # the tiny corpus's hits are still there, where they belong
    words = two_corpora.search("faster", k=3, mode="lexical").hits
    assert words[0].chunk.path == "docs/todo.md", [h.id for h in words]


def test_one_corpus_search_is_unchanged_by_the_merge(two_corpora: Workspace) -> None:
    both = two_corpora.search("make_tiled_copy", k=10, mode="lexical").hits
    alone = two_corpora.search("make_tiled_copy", ["demo"], k=10, mode="lexical").hits
    assert [h.id for h in both if h.chunk.corpus == "demo"][:3] == [h.id for h in alone][:3]


def test_shared_idf_scores_equal_one_index_over_both_corpora(tmp_path: Path) -> None:
    """Merged by score with one IDF, two corpora rank as one index over both would
    (documents of one length, so BM25's length part is the same in every index)."""
    from ctxkernel.corpus import Chunk
    from ctxkernel.corpuscache import CorpusCache, FileEntry
    from ctxkernel.lexical import shared_idf_weights

    big = ["tile copy layout pad pad pad pad"] * 30 + ["tile pad pad pad pad pad pad"] * 10
    big += ["make tiled copy atom thr val layout"]
    tiny = ["make copy tile layout pad pad pad", "faster kernels copy pad pad pad pad"]
    docs = {"big": big, "tiny": tiny, "all": big + tiny}
    indexes = {}
    for name, texts in docs.items():
        cache = CorpusCache(tmp_path / name, name)
        for i, t in enumerate(texts):
            path = f"{name}/{i}.txt"
            cache.replace_files([FileEntry(path, "h", "", 1)], [Chunk(name, path, 1, 1, t)])
        cache.build_bm25()
        loaded = cache.bm25()
        assert loaded is not None
        indexes[name] = loaded
    tokens = ["make", "copi", "layout", "faster"]
    stats = {n: {"body": indexes[n].doc_stats("body", tokens)} for n in ("big", "tiny")}
    weights = shared_idf_weights(stats)
    merged = [
        (float(s), n, i)
        for n in ("big", "tiny")
        for i, s in enumerate(indexes[n].scores("body", tokens, weights[n]["body"]))
    ]
    union = indexes["all"].scores("body", tokens)
    expected = [float(union[i]) for i in range(len(big))] + [
        float(union[len(big) + i]) for i in range(len(tiny))
    ]
    assert [s for s, _, _ in merged] == pytest.approx(expected, rel=1e-3)
    # and without the shared IDF the tiny corpus's scores would not compare
    plain = indexes["tiny"].scores("body", tokens)
    assert abs(float(plain[0]) - expected[len(big)]) > 0.1


def test_corpora_of_two_embedders_are_searched_together(
    isolated_home: Path, demo_corpus: str, tmp_path: Path
) -> None:
    """Each corpus gets the query vector of the embedder that built it; their distances
    are not on one scale, so each embedder's corpora make one dense list of their own."""
    import git

    path = tmp_path / "notes"
    notes = Repo(path, git.Repo.init(path, initial_branch="main"))
    for rel, text in NOTES.items():
        notes.write(rel, text)
    notes.commit("notes")
    define_corpus(isolated_home, "notes", str(path))
    Workspace(embed="minilm").index(demo_corpus)
    Workspace().index("notes")
    ws = Workspace()
    assert {ws.store.record(n).embedder for n in (demo_corpus, "notes")} == {"minilm", "static"}  # type: ignore[union-attr]
    dense = ws.search("how to make a copy of a tiled layout", k=20, mode="dense").hits
    assert {h.chunk.corpus for h in dense} == {demo_corpus, "notes"}
    assert dense[0].rank == 1
    hybrid = ws.search("make_tiled_copy", k=1).hits
    assert hybrid[0].chunk.corpus == demo_corpus and "make_tiled_copy" in hybrid[0].chunk.text
