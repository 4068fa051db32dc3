"""Index end to end on a git repo the test builds: search, incremental update, skips,
an interrupted run that resumes."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from ctxkernel import Workspace
from ctxkernel.corpuscache import CorpusCache

from .conftest import Repo


@pytest.fixture
def ws(isolated_home: Path) -> Workspace:
    return Workspace()


def test_index_then_paraphrased_query_finds_planted_chunk(
    ws: Workspace, demo_corpus: str, upstream: Repo
) -> None:
    report = ws.index(demo_corpus)
    assert report.files_total == 3 and report.files_changed == 3
    assert report.chunks_total >= 3  # kernels.py, copy.hpp, guide.md: at least one chunk each
    assert report.embedded > 0
    hits = ws.search(
        "avoid bank conflicts when reading columns of a tile in shared memory", k=5
    ).hits
    assert "planted_swizzle_shared_memory_banks" in hits[0].chunk.defines
    top = hits[0].chunk
    assert top.path == "src/kernels.py"
    assert top.url.startswith("https://example.invalid/blob/" + upstream.repo.head.commit.hexsha)
    assert top.url.endswith(f"#L{top.start_line}-L{top.end_line}")
    assert top.commit == upstream.repo.head.commit.hexsha
    # every mode answers; filters hold
    for mode in ("lexical", "dense"):
        assert ws.search("ring buffer pipeline stages", k=3, mode=mode).hits
    docs_only = ws.search("stages barrier producer", kind="doc").hits
    assert docs_only and all(h.chunk.kind == "doc" for h in docs_only)
    cpp_only = ws.search("tiled copy", language="cpp").hits
    assert cpp_only and all(h.chunk.language == "cpp" for h in cpp_only)
    glob_only = ws.search("softmax", path="src/*").hits
    assert glob_only and all(h.chunk.path.startswith("src/") for h in glob_only)


def test_symbol_query_ranks_definition_first(ws: Workspace, demo_corpus: str) -> None:
    ws.index(demo_corpus)
    hit = ws.search("make_tiled_copy", k=3).hits[0]
    assert hit.chunk.path == "include/copy.hpp"
    assert "make_tiled_copy" in hit.chunk.defines


def test_update_reindexes_only_the_changed_file(
    ws: Workspace, demo_corpus: str, upstream: Repo
) -> None:
    first = ws.index(demo_corpus)
    upstream.write(
        "docs/guide.md",
        (upstream.path / "docs/guide.md").read_text()
        + "\n## Tails\n\nMasked loads handle the ragged tail of a row.\n",
    )
    upstream.remove("include/copy.hpp")
    upstream.commit("edit guide, drop header")
    report = ws.update(demo_corpus)
    assert report.files_changed == 1
    assert report.files_removed == 1
    assert report.files_unchanged == 1
    # only the new section's text had to be embedded; the guide's other sections were reused
    assert 0 < report.embedded < first.embedded
    assert report.embeddings_reused >= 1
    assert not ws.search("make_tiled_copy", mode="lexical").hits or all(
        h.chunk.path != "include/copy.hpp" for h in ws.search("make_tiled_copy").hits
    )
    hits = ws.search("ragged tail masked loads", k=3).hits
    assert hits[0].chunk.path == "docs/guide.md"
    record = ws.store.record(demo_corpus)
    assert (
        record is not None
        and record.complete
        and record.version == upstream.repo.head.commit.hexsha
    )
    # a no-op run touches nothing
    again = ws.update(demo_corpus)
    assert again.files_changed == 0 and again.embedded == 0


def test_binary_huge_non_utf8_files_are_skipped_and_counted(
    ws: Workspace, demo_corpus: str, upstream: Repo
) -> None:
    (upstream.path / "src" / "blob.py").write_bytes(b"\x00\x01binary")
    (upstream.path / "src" / "latin.py").write_bytes("caf\xe9 = 1\n".encode("latin-1"))
    (upstream.path / "src" / "huge.py").write_text("x = 1\n" * 1_000_000)
    upstream.commit("odd files")
    report = ws.index(demo_corpus)
    assert report.skipped == {"binary": 1, "non_utf8": 1, "huge": 1}
    record = ws.store.record(demo_corpus)
    assert record is not None and record.skipped["huge"] == 1


def test_interrupted_index_still_answers_and_resumes(
    ws: Workspace, demo_corpus: str, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws.index(demo_corpus)
    for i in range(6):
        upstream.write(
            f"src/more_{i}.py",
            f'def extra_{i}():\n    """Extra helper number {i}."""\n    return {i}\n',
        )
    upstream.commit("more files")
    import ctxkernel.indexer as indexer

    monkeypatch.setattr(indexer, "BATCH_CHUNKS", 1)
    calls = {"n": 0}
    real = CorpusCache.replace_files

    def dying_write(self: CorpusCache, *args: object, **kwargs: object) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the user pressed Ctrl-C mid-run
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(CorpusCache, "replace_files", dying_write)
    with pytest.raises(KeyboardInterrupt):
        ws.update(demo_corpus)
    monkeypatch.setattr(CorpusCache, "replace_files", real)
    fresh = Workspace()
    record = fresh.store.record(demo_corpus)
    assert record is not None and not record.complete  # `corpora` shows the run as unfinished
    assert fresh.search("avoid bank conflicts swizzle", k=3).hits  # still answers
    report = fresh.update(demo_corpus)
    assert report.files_changed == 4  # the six new files minus the two written before the interrupt
    done = fresh.store.record(demo_corpus)
    assert done is not None and done.complete
    cache = fresh.store.cache(demo_corpus)
    assert cache.rows_without_vectors(done.model) == []  # every chunk has its vector
    assert len(cache.dense().rows) == cache.count()
    assert fresh.search("extra helper number 5", k=10, mode="lexical").hits


def test_interrupted_embedding_keeps_finished_groups(
    ws: Workspace, demo_corpus: str, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Embedding runs before any write, in groups; a group done before Ctrl-C is not redone."""
    ws.index(demo_corpus)
    for i in range(6):
        upstream.write(
            f"src/late_{i}.py", f'def late_{i}():\n    """Late helper {i}."""\n    return {i}\n'
        )
    upstream.commit("late files")
    import ctxkernel.indexer as indexer
    from ctxkernel.embedders.embed import Embedder

    monkeypatch.setattr(indexer, "EMBED_GROUP", 2)
    kind = type(ws.embedder)
    real = kind.embed
    groups: list[int] = []

    def dying_embed(self: Embedder, texts: list[str], **kw: object) -> object:
        groups.append(len(texts))
        if len(groups) == 3:
            raise KeyboardInterrupt
        return real(self, texts, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(kind, "embed", dying_embed)
    with pytest.raises(KeyboardInterrupt):
        ws.update(demo_corpus)
    monkeypatch.setattr(kind, "embed", real)
    assert groups == [2, 2, 2]
    fresh = Workspace()
    assert fresh.search("avoid bank conflicts swizzle", k=3).hits  # the old store answers
    report = fresh.update(demo_corpus)
    assert report.embeddings_reused >= 4  # the two groups finished before the interrupt
    assert report.embedded == 2
    assert fresh.search("Late helper 5", k=5, mode="lexical").hits


def test_killed_index_process_leaves_a_working_store(
    demo_corpus: str, upstream: Repo, isolated_home: Path
) -> None:
    """SIGKILL at a random point of a real CLI run, then a second run completes it."""
    import signal
    import subprocess
    import sys
    import time

    for i in range(40):
        upstream.write(
            f"src/gen_{i}.py",
            "\n".join(
                f"def f{i}_{j}():\n    '''Generated helper {i} {j}.'''\n    return {j}\n"
                for j in range(8)
            ),
        )
    upstream.commit("many files")
    env = {**os.environ, "CTXKERNEL_HOME": str(isolated_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkernel", "index", demo_corpus],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cache_db = isolated_home / "indexes" / "lexical" / demo_corpus / "meta.sqlite"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if cache_db.exists() and Workspace().store.cache(demo_corpus).count() > 0:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ws = Workspace()
    report = ws.index(demo_corpus)
    assert ws.store.record(demo_corpus).complete  # type: ignore[union-attr]
    cache = ws.store.cache(demo_corpus)
    assert report.chunks_total == cache.count() == len(cache.dense().rows)
    assert ws.search("Generated helper 39 7", mode="lexical", k=3).hits


def test_index_force_reembeds_everything_as_help_says(ws: Workspace, demo_corpus: str) -> None:
    from click.testing import CliRunner

    from ctxkernel.cli.retrieval import index_cmd

    first = ws.index(demo_corpus)
    report = ws.index(demo_corpus, force=True)
    assert report.files_changed == 3
    # every chunk embedded again: the cached vectors are not used
    assert report.embeddings_reused == 0 and report.embedded == first.embedded > 0
    assert "re-embed everything" in CliRunner().invoke(index_cmd, ["--help"]).output


def test_index_rebuild_reuses_cached_vectors(ws: Workspace, demo_corpus: str) -> None:
    ws.index(demo_corpus)
    report = ws.index(demo_corpus, rebuild=True)
    assert report.files_changed == 3  # re-chunked from the source
    assert report.embedded == 0 and report.embeddings_reused > 0


def test_second_concurrent_index_run_fails_fast(ws: Workspace, demo_corpus: str) -> None:
    """Two runs on one corpus would interleave their writes: the second one refuses."""
    import fcntl

    from ctxkernel.errors import UserError

    locks = ws.store.index_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{demo_corpus}.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("pid 4242")
        held.flush()
        with pytest.raises(UserError, match="another index run of 'demo' is in progress"):
            ws.index(demo_corpus)
    assert ws.index(demo_corpus).files_total == 3  # free again once the holder is gone


def test_search_on_an_emptied_corpus_answers_nothing(
    ws: Workspace, demo_corpus: str, upstream: Repo
) -> None:
    """Regression: an index whose files all went away must answer with no hits, not crash."""
    ws.index(demo_corpus)
    for rel in ("src/kernels.py", "include/copy.hpp", "docs/guide.md"):
        upstream.remove(rel)
    upstream.commit("empty")
    report = ws.update(demo_corpus)
    assert report.files_removed == 3 and report.chunks_total == 0
    for mode in ("hybrid", "lexical", "dense"):
        assert ws.search("softmax", corpora=[demo_corpus], mode=mode).hits == []


def test_small_pieces_are_joined_when_the_corpus_asks(isolated_home: Path, upstream: Repo) -> None:
    """With the built-in default (min_lines 12) the demo's short functions share a chunk."""
    from .conftest import define_corpus

    define_corpus(isolated_home, "joined", str(upstream.path), min_lines=12)
    ws = Workspace()
    ws.index("joined")
    cache = ws.store.cache("joined")
    kernels = cache.chunks_of_file("src/kernels.py")
    assert len(kernels) == 1
    assert {"planted_swizzle_shared_memory_banks", "softmax_rows", "RingBuffer"} <= set(
        kernels[0].defines
    )
    hit = ws.search("softmax_rows", corpora=["joined"], k=1).hits[0]
    assert hit.chunk.path == "src/kernels.py"


def test_lookups_on_a_local_store_never_import_chromadb(
    ws: Workspace, demo_corpus: str, isolated_home: Path
) -> None:
    """docs, grep, show and lexical search read the local cache and the records mirror."""
    import json as json_mod
    import subprocess
    import sys

    ws.index(demo_corpus)
    assert json_mod.loads((ws.store.index_dir / "records.json").read_text())[demo_corpus][
        "complete"
    ]
    code = (
        "import sys\n"
        "from ctxkernel import Workspace\n"
        "ws = Workspace()\n"
        "assert ws.docs('softmax_rows').best is not None\n"
        "assert ws.grep('demo', 'def advance').hits\n"
        "assert ws.search('ring buffer stages', mode='lexical').hits\n"
        "assert ws.read('demo:src/kernels.py:1-3').lines\n"
        "print('chromadb' in sys.modules)\n"
    )
    env = {**__import__("os").environ, "CTXKERNEL_HOME": str(isolated_home)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_top_k_is_the_head_of_a_longer_list() -> None:
    """Fused candidates are re-scored (length prior) in a window that does not shrink with
    k: a one-line stub ranked first must not keep first place at k=1 only."""
    from ctxkernel.corpus import Chunk
    from ctxkernel.search import Filters, Searcher

    class Rows:  # what the searcher's chunk memo reads of a corpus cache
        corpus = "c"

        def __init__(self, chunks: dict[int, Chunk]) -> None:
            self.chunks = chunks
            self.conn = sqlite3.connect(":memory:")

        def db(self) -> sqlite3.Connection:
            return self.conn

        def chunks_by_rows(self, rows: list[int]) -> dict[int, Chunk]:
            return {r: self.chunks[r] for r in rows}

    def chunk(i: int, lines: int) -> Chunk:
        text = "\n".join(f"line {j} of {i}" for j in range(lines))
        return Chunk("c", f"f{i}.py", 1, lines, text)

    # three stubs (1 line) lead by less than their length prior costs them
    chunks = {i: chunk(i, 1) for i in range(3)} | {i: chunk(i, 20) for i in range(3, 8)}
    fused = [(("c", i), 1.0 - 0.02 * i) for i in range(8)]
    searcher = Searcher(None)  # type: ignore[arg-type]  # _materialize reads no store
    caches = {"c": Rows(chunks)}
    ids = {
        k: [h.chunk.id for h in searcher._materialize(caches, fused, k, Filters(), "hybrid")]  # type: ignore[arg-type]
        for k in (1, 2, 8)
    }
    assert ids[1] == ids[8][:1] and ids[2] == ids[8][:2]
    assert ids[8][0] == chunks[3].id  # the prior moved the stubs down
