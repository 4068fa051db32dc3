"""The numpy BM25 (ctxkernel.lexical): the scores bm25s gives on the same tokens, an index
built from stored term counts after an update equal to one built from scratch, and term
counts written with their chunks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxkernel import lexical as lexical_module
from ctxkernel.corpus import Chunk
from ctxkernel.corpuscache import CorpusCache, FileEntry
from ctxkernel.lexical import BM25_PARAMS, head_text, path_text
from ctxkernel.tokenize import tokenize

FILES = {
    "src/copy.hpp": [
        ("make_tiled_copy", "auto make_tiled_copy(Atom atom) { return TiledCopy{atom}; }"),
        ("SM90_TMA_LOAD", "struct SM90_TMA_LOAD { cp.async.bulk.tensor mbarrier tma tma }"),
    ],
    "src/gemm.py": [
        ("matmul", "def matmul(a, b):\n    return tl.dot(a, b)  # tile tile tile"),
        ("softmax", "def softmax(x):\n    '''softmax of each row, numerically stable'''"),
        ("", "import triton\nimport triton.language as tl"),
    ],
    "docs/guide.md": [("Pipelining", "Use several stages so that loads overlap with math tma.")],
}


def _chunks(files: dict[str, list[tuple[str, str]]]) -> dict[str, list[Chunk]]:
    out: dict[str, list[Chunk]] = {}
    for path, pieces in files.items():
        out[path] = [
            Chunk(
                "t", path, 10 * i + 1, 10 * i + 5, text, symbol=sym, defines=(sym,) if sym else ()
            )
            for i, (sym, text) in enumerate(pieces)
        ]
    return out


def _cache(tmp_path: Path, files: dict[str, list[tuple[str, str]]], name: str) -> CorpusCache:
    cache = CorpusCache(tmp_path / name, "t")
    for path, chunks in _chunks(files).items():
        cache.replace_files([FileEntry(path, "h", "", 5)], chunks)
    cache.build_bm25()
    return cache


QUERIES = [
    "tma load mbarrier",
    "make_tiled_copy",
    "softmax of each row",
    "tile",
    "tl.dot",
    "nothing",
]


def test_scores_are_the_ones_bm25s_gives(tmp_path: Path) -> None:
    bm25s = pytest.importorskip("bm25s")
    cache = _cache(tmp_path, FILES, "a")
    index = cache.bm25()
    chunks = [cache.chunks_by_rows([int(r)])[int(r)] for r in index.rows]
    docs = {
        "body": [tokenize(c.text) for c in chunks],
        "head": [
            tokenize(head_text(c.path, c.symbol, c.title, " ".join(c.defines))) for c in chunks
        ],
    }
    for field, tokens in docs.items():
        k1, b = BM25_PARAMS[field]
        ref = bm25s.BM25(k1=k1, b=b)
        ref.index(tokens, show_progress=False)
        for q in QUERIES:
            qt = [t for t in tokenize(q) if t in ref.vocab_dict]
            want = ref.get_scores(qt) if qt else np.zeros(len(chunks))
            np.testing.assert_allclose(index.scores(field, tokenize(q)), want, rtol=1e-5, atol=1e-6)
    # the file field: whole files (path words and every chunk), spread to their chunks
    paths = list(dict.fromkeys(c.path for c in chunks))
    file_docs = [
        tokenize(path_text(p)) + [t for c in chunks if c.path == p for t in tokenize(c.text)]
        for p in paths
    ]
    ref = bm25s.BM25(k1=BM25_PARAMS["file"][0], b=BM25_PARAMS["file"][1])
    ref.index(file_docs, show_progress=False)
    for q in QUERIES:
        qt = [t for t in tokenize(q) if t in ref.vocab_dict]
        per_file = ref.get_scores(qt) if qt else np.zeros(len(paths))
        want = np.array([per_file[paths.index(c.path)] for c in chunks])
        np.testing.assert_allclose(index.scores("file", tokenize(q)), want, rtol=1e-5, atol=1e-6)


def test_an_updated_index_equals_one_built_from_scratch(tmp_path: Path) -> None:
    """Term counts are kept per chunk: after replacing and removing files, the index is the
    one a fresh build of the same files gives (ids differ, rankings and scores do not)."""
    cache = _cache(tmp_path, FILES, "updated")
    changed = dict(FILES)
    changed["src/gemm.py"] = [
        ("matmul", "def matmul(a, b):\n    return tl.dot(a, b)  # new words: swizzle")
    ]
    del changed["docs/guide.md"]
    new = _chunks(changed)
    cache.replace_files([FileEntry("src/gemm.py", "h2", "", 3)], new["src/gemm.py"])
    cache.remove_files(["docs/guide.md"])
    cache.build_bm25()
    fresh = _cache(tmp_path, changed, "fresh")

    def ranked(c: CorpusCache, q: str) -> dict[str, list[tuple[str, float]]]:
        index = c.bm25()
        out = {}
        for field in ("body", "head", "file"):
            scores = index.scores(field, tokenize(q))
            ids = [c.chunks_by_rows([int(r)])[int(r)].id for r in index.rows]
            out[field] = sorted((i, round(float(s), 5)) for i, s in zip(ids, scores, strict=True))
        return out

    for q in [*QUERIES, "swizzle", "stages overlap"]:
        assert ranked(cache, q) == ranked(fresh, q)
    assert cache.bm25().rank(tokenize("swizzle"), 5)["body"]


def test_term_counts_are_written_with_their_chunks(tmp_path: Path) -> None:
    cache = _cache(tmp_path, FILES, "c")
    db = cache.db()
    chunk_rows = {r for (r,) in db.execute("SELECT row FROM chunks")}
    term_rows = {r for (r,) in db.execute("SELECT row FROM chunk_terms")}
    assert chunk_rows == term_rows
    cache.remove_files(["src/gemm.py"])
    assert {r for (r,) in db.execute("SELECT row FROM chunk_terms")} == {
        r for (r,) in db.execute("SELECT row FROM chunks")
    }
    assert "src/gemm.py" not in {p for (p,) in db.execute("SELECT path FROM file_terms")}


def test_a_store_without_term_counts_is_backfilled(tmp_path: Path) -> None:
    """Chunks stored before term counts were kept (or rebuilt from a chroma server) are
    tokenized when the index is built."""
    cache = _cache(tmp_path, FILES, "old")
    db = cache.db()
    with db:
        db.execute("DELETE FROM chunk_terms")
        db.execute("DELETE FROM file_terms")
    cache.build_bm25()
    top = cache.bm25().rank(tokenize("make_tiled_copy"), 3)["head"]
    assert cache.chunks_by_rows(top[:1])[top[0]].symbol == "make_tiled_copy"


def test_chunking_in_worker_processes_gives_the_serial_result(
    demo_corpus: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many files are chunked (and their terms counted) in forked workers: same chunks,
    same term counts, same ranking as one process."""
    import ctxkernel.indexer as indexer
    from ctxkernel import Workspace

    def snapshot(ws: Workspace) -> tuple[list[tuple[str, str]], list[int]]:
        cache = ws.store.cache(demo_corpus)
        chunks = sorted(
            (c.id, c.text)
            for c in cache.chunks_by_rows(
                [r for (r,) in cache.db().execute("SELECT row FROM chunks")]
            ).values()
        )
        hits = ws.search("ring buffer pipeline stages", k=5, mode="lexical").hits
        return chunks, [h.chunk.start_line for h in hits]

    monkeypatch.setenv("CTXKERNEL_INDEX_WORKERS", "1")
    serial_ws = Workspace(index_dir=str(Path(os.environ["CTXKERNEL_HOME"]) / "serial"))
    serial_ws.index(demo_corpus)
    monkeypatch.setenv("CTXKERNEL_INDEX_WORKERS", "2")
    monkeypatch.setattr(indexer, "PARALLEL_MIN_FILES", 1)
    pids = Path(os.environ["CTXKERNEL_HOME"]) / "pids"
    real = indexer.terms_of

    def counting(chunk: Chunk) -> object:
        with pids.open("a") as fh:
            fh.write(f"{os.getpid()}\n")
        return real(chunk)

    monkeypatch.setattr(indexer, "terms_of", counting)  # forked workers inherit the patch
    parallel_ws = Workspace(index_dir=str(Path(os.environ["CTXKERNEL_HOME"]) / "parallel"))
    parallel_ws.index(demo_corpus)
    workers = set(pids.read_text().split())
    assert workers and str(os.getpid()) not in workers
    assert snapshot(parallel_ws) == snapshot(serial_ws)


def test_a_file_entry_stands_in_by_its_best_chunk_not_its_first(tmp_path: Path) -> None:
    """The ``file`` ranking lists a file through the chunk whose body matches the query
    best. It used to add that chunk's body score, over the corpus's best, to the float32
    file score as a 1e-6 tiebreak: below the score's precision once the file score
    passes a few units or another file holds the best body match, so the file's first
    chunk stood in for it whatever the question asked."""
    words = "cache key hashes source options compile flags"
    files = {
        "src/cache.py": [
            ("", "Kernel cache overview: compiled kernels are cached on disk and reused."),
            ("save", "def save(kernel, path):\n    write the kernel binary to disk"),
            ("generate_key", f"def generate_key(options):\n    # {words}\n    return sha256()"),
            ("load", "def load(path):\n    read the kernel binary back from disk"),
        ],
        # a glossary that says every word many times: the corpus's best body match
        "docs/glossary.md": [("Glossary", f"{words}\n" * 30)],
        "docs/other.md": [("Other", "Unrelated words about layouts and swizzles.")],
    }
    cache = _cache(tmp_path, files, "f")
    index = cache.bm25()
    for repeat in (1, 8):  # a repeated word weighs each time: file scores of ~2 and ~20
        query = tokenize(f"{words} " * repeat)
        rows = [row for row, _ in index.rank_scored(query, 5)["file"]]
        chunks = cache.chunks_by_rows(rows)
        stand_in = next(chunks[r] for r in rows if chunks[r].path == "src/cache.py")
        assert stand_in.symbol == "generate_key", (repeat, stand_in.symbol)


def _file_ranking_by_full_sort(
    index: Any, tokens: list[str], depth: int, allowed: Any, by_body: bool
) -> list[tuple[int, float]]:
    """The ``file`` ranking as it was computed before only the leading files' chunks
    were sorted: every matching chunk, in (key, position) order, each file's first."""
    body = index.scores("body", tokens)
    scores = index.scores("file", tokens)
    if allowed is not None:
        scores = np.where(allowed, scores, 0.0)
    matched = np.flatnonzero(scores > 0)
    key = scores[matched]
    if by_body:
        key = key.astype(np.float64) + 1e-6 * body[matched] / (float(body.max()) + 1.0)
    order = matched[np.argsort(-key, kind="stable")]
    _, first = np.unique(index.file_of[order], return_index=True)
    best = order[np.sort(first)[:depth]]
    return list(zip(index.rows[best].tolist(), scores[best].tolist(), strict=True))


@pytest.mark.parametrize("by_body", [True, False])
def test_the_file_ranking_sorts_only_the_files_that_can_lead_to_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_body: bool
) -> None:
    """A long question's words match most chunks of a corpus, and sorting all of them
    to list the ``depth`` best files was most of the ranking's time: only the chunks of
    files scoring at least the ``depth``-th best file score are sorted now. Files that
    tie (the same text) and a filter mask included, the ranking is the full sort's."""
    rng = np.random.default_rng(7)
    vocabulary = [
        "tma",
        "load",
        "mbarrier",
        "tile",
        "copy",
        "swizzle",
        "layout",
        "gemm",
        "warp",
        "barrier",
    ]
    files: dict[str, list[tuple[str, str]]] = {}
    for f in range(40):
        pieces = []
        for c in range(int(rng.integers(1, 6))):
            words = rng.choice(vocabulary, size=int(rng.integers(3, 12)))
            pieces.append((f"s{f}_{c}", " ".join(words)))
        files[f"src/f{f:02d}.py"] = pieces
    for twin in ("src/twin_a.py", "src/twin_b.py"):  # equal file scores
        files[twin] = [("", "tma load tile"), ("", "mbarrier copy")]
    cache = _cache(tmp_path, files, "lead")
    index = cache.bm25()
    monkeypatch.setattr(lexical_module, "FILE_BY_BODY", by_body)
    mask = rng.random(len(index.rows)) < 0.5
    for query in ("tma load", "tile copy swizzle layout gemm warp", "barrier mbarrier tma"):
        tokens = tokenize(query)
        for depth in (1, 3, 10, 100):
            for allowed in (None, mask):
                got = index.rank_scored(tokens, depth, allowed)["file"]
                want = _file_ranking_by_full_sort(index, tokens, depth, allowed, by_body)
                assert got == want, (query, depth, allowed is None)


def test_a_word_the_index_lacked_is_found_once_a_new_build_holds_it(tmp_path: Path) -> None:
    """A search's reader remembers the words the corpus lacks (it asks for them a few
    times per search); a later index run that adds one builds a new index, whose reader
    finds it."""
    cache = _cache(tmp_path, FILES, "absent")
    before = cache.bm25()
    asked: list[str] = []
    cache.db().set_trace_callback(lambda sql: asked.append(sql) if "FROM terms" in sql else None)
    assert "zebra" not in before.term_ids(["zebra", "tile"])
    assert len(asked) == 1
    assert "zebra" not in before.term_ids(["zebra", "tile"])
    assert len(asked) == 1  # both remembered: the found one and the absent one
    cache.db().set_trace_callback(None)
    (chunk,) = _chunks({"src/zebra.py": [("zebra", "def zebra():\n    stripes")]})["src/zebra.py"]
    cache.replace_files([FileEntry("src/zebra.py", "h", "", 5)], [chunk])
    cache.build_bm25()
    after = cache.bm25()
    assert after is not before
    assert "zebra" in after.term_ids(["zebra"])
    assert after.scores("body", ["zebra"]).max() > 0
