"""A damaged index — a truncated BM25 or vector snapshot file, a corrupted SQLite chunk
table, a corrupted legacy chroma store, a broken embedding cache — is named in one line with the command that
repairs it (exit 2, no traceback), and `index NAME --rebuild` repairs it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet

from .conftest import COPY_HPP, GUIDE_MD, KERNEL_PY, CliResult, Repo, define_corpus


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(index dir, upstream) of the demo corpus, indexed once; tests damage copies."""
    base = tmp_path_factory.mktemp("damage")
    up = Repo(base / "upstream", git.Repo.init(base / "upstream", initial_branch="main"))
    for rel, text in (("src/kernels.py", KERNEL_PY), ("include/copy.hpp", COPY_HPP),
                      ("docs/guide.md", GUIDE_MD)):  # fmt: skip
        up.write(rel, text)
    up.commit("initial")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CTXKERNEL_HOME", str(base / "home"))
        mp.setenv("XDG_CACHE_HOME", str(base / "cache"))
        define_corpus(base / "home", "demo", str(up.path))
        Workspace(base / "index").index("demo")
    return base / "index", up.path


@pytest.fixture
def index(pristine: tuple[Path, Path], isolated_home: Path, tmp_path: Path) -> Path:
    define_corpus(isolated_home, "demo", str(pristine[1]))
    copy = tmp_path / "index"
    shutil.copytree(pristine[0], copy)
    return copy


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(size)


def _sqlite_damage(path: Path) -> None:
    for extra in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        extra.unlink(missing_ok=True)
    _truncate(path, 100)


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "bm25-array": (lambda i: _truncate(i / "lexical/demo/bm25/body.docs.npy", 10),
                   "lexical/demo/bm25"),
    "bm25-counts": (lambda i: _truncate(i / "lexical/demo/bm25/head.tf.npy", 90),
                    "lexical/demo/bm25"),
    "bm25-rows": (lambda i: _truncate(i / "lexical/demo/bm25/rows.npy", 5), "lexical/demo/bm25"),
    "chunk-table": (lambda i: _sqlite_damage(i / "lexical/demo/meta.sqlite"),
                    "lexical/demo/meta.sqlite"),
}  # fmt: skip
QUERIES = [
    ("search", "make_tiled_copy", "--mode", "lexical"),
    ("search", "a copy atom for a tiled copy"),
    ("docs", "make_tiled_copy"),
    ("show", "demo:include/copy.hpp"),
    ("grep", "make_tiled_copy", "--corpus", "demo"),
    ("corpora", "--offline"),
]


def _one_line(res: CliResult, *fragments: str, progress: bool = False) -> str:
    assert res.code == 2 and "Traceback" not in res.err, res.err
    lines = res.err.strip().splitlines()
    if progress:  # `index` logs its stages on stderr first
        lines = [line for line in lines if line.startswith("ctxkernel: error: ")]
    assert len(lines) == 1 and lines[0].startswith("ctxkernel: error: "), res.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_lexical_index_is_named_with_its_repair(
    index: Path, run_cli: Callable[..., CliResult], damage: str
) -> None:
    spoil, part = DAMAGE[damage]
    spoil(index)
    idx = ("--index-dir", str(index))
    failed = 0
    for args in QUERIES:
        res = run_cli(*args, *idx)
        if res.code == 0:
            continue  # a command that never reads the broken part
        _one_line(res, part, "damaged", "`ctxkernel index demo --rebuild`")
        failed += 1
    assert failed >= 2  # both searches read every part
    tool = ToolSet(Workspace(index)).call("search", {"query": "make_tiled_copy", "mode": "lexical"})
    assert tool.is_error and "--rebuild" in tool.text and "internal error" not in tool.text
    repaired = run_cli("index", "demo", "--rebuild", *idx)
    assert repaired.code == 0, repaired.err
    assert "damaged local index" in repaired.err
    for args in QUERIES:
        assert run_cli(*args, *idx).code == 0, args


def test_damaged_vector_snapshot_is_named_with_its_repair(
    index: Path, run_cli: Callable[..., CliResult]
) -> None:
    _truncate(index / "lexical/demo/dense/matrix.npy", 100)
    idx = ("--index-dir", str(index))
    line = _one_line(run_cli("search", "a copy atom for a tiled copy", *idx), "lexical/demo/dense")
    assert "damaged" in line and "`ctxkernel index demo --rebuild`" in line
    # the lexical side does not read the vectors and keeps working
    assert run_cli("search", "make_tiled_copy", "--mode", "lexical", *idx).code == 0
    repaired = run_cli("index", "demo", "--rebuild", *idx)
    assert repaired.code == 0, repaired.err
    assert "damaged local index" in repaired.err
    assert run_cli("search", "a copy atom for a tiled copy", *idx).code == 0


def test_corrupted_legacy_chroma_store_is_named_with_its_repair(
    index: Path, run_cli: Callable[..., CliResult]
) -> None:
    """A store made when vectors lived in chroma still has its chroma dir; damaged, it is
    named and --rebuild sets it aside."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(index / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    client.get_or_create_collection("ck-demo", embedding_function=None)
    del client
    from chromadb.api.client import SharedSystemClient

    SharedSystemClient.clear_system_cache()
    (index / "records.json").unlink()  # the records are read from the legacy chroma dir
    _sqlite_damage(index / "chroma" / "chroma.sqlite3")
    idx = ("--index-dir", str(index))
    line = _one_line(run_cli("search", "a copy atom for a tiled copy", *idx), "vector store")
    # the records were in the damaged store: the corpus's name is not known
    assert "chroma.sqlite3" in line and "`ctxkernel index NAME --rebuild`" in line
    repaired = run_cli("index", "demo", "--rebuild", *idx)
    assert repaired.code == 0, repaired.err
    assert "moved the damaged vector store aside" in repaired.err
    assert list(index.glob("chroma.damaged-*")) and not (index / "chroma").exists()
    assert run_cli("search", "a copy atom for a tiled copy", *idx).code == 0


def test_damaged_embedding_cache_is_named_with_its_repair(
    index: Path, run_cli: Callable[..., CliResult]
) -> None:
    _sqlite_damage(index / "embeddings.sqlite")
    idx = ("--index-dir", str(index))
    _one_line(
        run_cli("index", "demo", "--force", *idx), "embedding cache", "--rebuild", progress=True
    )
    repaired = run_cli("index", "demo", "--rebuild", *idx)
    assert repaired.code == 0 and "embedding cache aside" in repaired.err
    assert run_cli("index", "demo", "--force", *idx).code == 0


@pytest.mark.parametrize("how", ["deleted", "truncated"])
def test_lost_records_file_is_recovered_from_the_corpus_caches(
    index: Path, run_cli: Callable[..., CliResult], how: str
) -> None:
    """Regression: a local store keeps no chroma; a lost records.json made every corpus
    look not indexed (and the next index run dropped its cache)."""
    records = index / "records.json"
    if how == "deleted":
        records.unlink()
    else:
        _truncate(records, 7)
    idx = ("--index-dir", str(index))
    found = run_cli("search", "a copy atom for a tiled copy", "--json", *idx)
    assert found.code == 0, found.err
    assert not (index / "chroma").exists()
    again = run_cli("index", "demo", "--json", *idx)
    assert again.code == 0, again.err
    assert '"files_changed": 0' in again.out


def test_a_warm_store_sees_records_written_by_another_process(index: Path) -> None:
    """The records are read again only when records.json changed: a long-lived store
    (the MCP server's) still sees a corpus another process dropped or damaged."""
    from ctxkernel.store import Store

    warm = Store(index)
    assert warm.corpora() == ["demo"]
    assert warm.corpora() == ["demo"]  # the second read is the memo's
    records = index / "records.json"
    saved = records.read_text()
    Store(index)._write_local_records({})  # another process's store: a new file
    assert warm.corpora() == []
    records.write_text(saved)  # written in place, not replaced: same file, new content
    assert warm.corpora() == ["demo"]
    _truncate(records, 7)  # damaged: recovered from the corpus caches, as before
    assert warm.corpora() == ["demo"]


def test_a_garbage_links_table_is_named_for_docs_and_related(
    index: Path, run_cli: Callable[..., CliResult]
) -> None:
    """`docs` and `related` read the concept links (lexical/<corpus>/links.sqlite): a file
    there that is not a database was a sqlite3 traceback."""
    (index / "lexical/demo/links.sqlite").write_bytes(b"not a database at all\n" * 200)
    idx = ("--index-dir", str(index))
    for args in (("docs", "make_tiled_copy"), ("related", "demo:include/copy.hpp:13")):
        _one_line(
            run_cli(*args, *idx),
            "lexical/demo/links.sqlite",
            "damaged",
            "`ctxkernel index demo --rebuild`",
        )
    repaired = run_cli("index", "demo", "--rebuild", *idx)
    assert repaired.code == 0, repaired.err
    assert run_cli("docs", "make_tiled_copy", *idx).code == 0
    related = run_cli("related", "demo:include/copy.hpp:13", *idx)
    assert related.code in (0, 1) and related.err == "", related  # no ptx corpus: no link


def test_one_damaged_corpus_is_skipped_by_a_search_of_every_corpus(
    index: Path, pristine: tuple[Path, Path], isolated_home: Path, run_cli: Callable[..., CliResult]
) -> None:
    """One damaged corpus made a search of every corpus fail: the others answer, and a
    warning line names the one left out with its repair."""
    define_corpus(isolated_home, "other", str(pristine[1]))
    Workspace(index).index("other")
    _truncate(index / "lexical/demo/bm25/body.docs.npy", 10)
    idx = ("--index-dir", str(index))
    for args in (("make_tiled_copy", "--mode", "lexical"), ("a copy atom for a tiled copy",)):
        res = run_cli("search", *args, "--json", *idx)
        assert res.code == 0 and "Traceback" not in res.err, res.err
        docs = [json.loads(line) for line in res.out.splitlines()]
        assert {d["corpus"] for d in docs if d["type"] == "hit"} == {"other"}
        assert docs[-1]["corpora"] == ["other"] and list(docs[-1]["skipped"]) == ["demo"]
        warned = res.err.strip().splitlines()
        assert len(warned) == 1 and warned[0].startswith("ctxkernel: warning: skipped:")
        assert "'demo'" in warned[0] and "`ctxkernel index demo --rebuild`" in warned[0]
    text = ToolSet(Workspace(index)).run("search", {"query": "make_tiled_copy"})
    assert "[skipped: " in text.splitlines()[0] and "demo" in text.splitlines()[0]
    # asked for by name, the damaged corpus is still an error
    _one_line(run_cli("search", "make_tiled_copy", "--corpus", "demo", *idx), "damaged")
