"""grep (ripgrep and the Python fallback), show, and the CLI's exit codes and --json."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import Workspace
from ctxkernel.errors import UserError

from .conftest import CliResult, Repo


@pytest.fixture
def indexed(isolated_home: Path, demo_corpus: str) -> Workspace:
    ws = Workspace()
    ws.index(demo_corpus)
    return ws


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_grep_with_context(indexed: Workspace, engine: str) -> None:
    result = indexed.grep("demo", r"def advance", context=2, engine=engine)
    assert result.engine == engine
    assert len(result.hits) == 1
    hit = result.hits[0]
    text = (Path(indexed.store.cache("demo").file("src/kernels.py").local)).read_text().splitlines()  # type: ignore[union-attr]
    line = text.index("    def advance(self):") + 1
    assert hit.extra["matches"] == [line]
    assert (hit.chunk.start_line, hit.chunk.end_line) == (line - 2, line + 2)
    assert hit.chunk.text.splitlines() == text[line - 3 : line + 2]
    assert hit.chunk.url.endswith(f"#L{line - 2}-L{line + 2}")


def test_grep_flags(indexed: Workspace) -> None:
    assert not indexed.grep("demo", "RINGBUFFER").hits
    assert indexed.grep("demo", "RINGBUFFER", ignore_case=True).hits
    only_docs = indexed.grep("demo", "stage", ignore_case=True, path_glob="docs/*").hits
    assert only_docs and {h.chunk.path for h in only_docs} == {"docs/guide.md"}
    capped = indexed.grep("demo", r"\w", max_results=3)
    assert capped.truncated.startswith("max results")
    assert sum(len(h.extra["matches"]) for h in capped.hits) <= 3


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_grep_rejects_bad_patterns(indexed: Workspace, engine: str) -> None:
    with pytest.raises(UserError, match="bad regex"):
        indexed.grep("demo", "(unclosed", engine=engine)
    with pytest.raises(UserError, match="empty grep pattern"):
        indexed.grep("demo", "", engine=engine)


def test_grep_falls_back_to_chunk_texts_without_local_files(indexed: Workspace) -> None:
    cache = indexed.store.cache("demo")
    with cache.db() as db:
        db.execute("UPDATE files SET local=''")
    result = indexed.grep("demo", "def softmax_rows")
    assert result.engine == "chunks"
    assert result.hits[0].chunk.path == "src/kernels.py"


def test_show_reads_exact_lines(indexed: Workspace, upstream: Repo) -> None:
    rng = indexed.read("demo:src/kernels.py:6-8")
    lines = (upstream.path / "src/kernels.py").read_text().splitlines()
    assert rng.lines == lines[5:8]
    assert rng.url.endswith("#L6-L8")
    with pytest.raises(UserError, match=r"has \d+ lines"):
        indexed.read("demo:src/kernels.py:900-910")
    with pytest.raises(UserError, match="not an indexed file"):
        indexed.read("demo:src/nope.py:1-2")


def test_cli_search_json_and_exit_codes(
    indexed: Workspace, run_cli: Callable[..., CliResult]
) -> None:
    res = run_cli("search", "numerically stable softmax", "--corpus", "demo", "-k", "2", "--json")
    assert res.code == 0
    rows = [json.loads(line) for line in res.out.splitlines()]
    hits = [r for r in rows if r["type"] == "hit"]
    assert rows[-1]["type"] == "summary" and len(hits) <= 2
    for key in ("corpus", "path", "start_line", "end_line", "score", "text", "url", "id"):
        assert key in hits[0]
    assert "softmax_rows" in hits[0]["defines"]
    shown = run_cli("show", hits[0]["id"], "--json")
    assert shown.code == 0 and "def softmax_rows" in json.loads(shown.out)["text"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("search", "x", "--corpus", "nope"), "not indexed"),
        (("grep", "(", "--corpus", "demo"), "bad regex"),
        (("grep", "x", "--corpus", "nope"), "not indexed"),
        (("show", "demo:src/kernels.py:50-40"), "bad line range"),
        (("show", "demo:src/kernels.py:400-410"), "has"),
        (("index", "nope"), "unknown corpus"),
        (("index", "demo", "--source", "/no/such/path"), "--source"),
    ],
)
def test_cli_errors_are_one_line_exit_2(
    indexed: Workspace, run_cli: Callable[..., CliResult], args: tuple[str, ...], message: str
) -> None:
    res = run_cli(*args)
    assert res.code == 2
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxkernel: error:") and message in lines[0]
    assert "Traceback" not in res.err


def test_cli_nothing_found_is_exit_1(indexed: Workspace, run_cli: Callable[..., CliResult]) -> None:
    assert run_cli("grep", "zzzz_not_there", "--corpus", "demo").code == 1


def test_cli_grep_json(indexed: Workspace, run_cli: Callable[..., CliResult]) -> None:
    res = run_cli("grep", "make_tiled_copy", "--corpus", "demo", "-C", "1", "--json")
    rows = [json.loads(line) for line in res.out.splitlines()]
    assert res.code == 0
    assert rows[0]["type"] == "hit" and rows[0]["path"] == "include/copy.hpp" and rows[0]["matches"]
    assert rows[-1]["type"] == "summary" and rows[-1]["engine"] == "rg"


def test_cli_index_and_corpora_json(
    isolated_home: Path, demo_corpus: str, upstream: Repo, run_cli: Callable[..., CliResult]
) -> None:
    res = run_cli("index", demo_corpus, "--json")
    assert res.code == 0
    summary = json.loads(res.out)
    assert summary["type"] == "summary" and summary["files_total"] == 3
    res = run_cli("corpora", "--json")
    rows = {json.loads(line)["name"]: json.loads(line) for line in res.out.splitlines()}
    demo = rows["demo"]
    assert demo["indexed"] and demo["complete"] and demo["files"] == 3 and demo["chunks"] > 0
    assert demo["version"] == upstream.repo.head.commit.hexsha
    assert demo["upstream_moved"] is False
    assert rows["cutlass"]["indexed"] is False
    upstream.write("src/late.py", "def late():\n    return 0\n")
    upstream.commit("late")
    moved = {
        json.loads(line)["name"]: json.loads(line)
        for line in run_cli("corpora", "--json").out.splitlines()
    }
    assert moved["demo"]["upstream_moved"] is True


def test_index_shows_progress_bars_on_a_terminal_only(demo_corpus: str) -> None:
    """Under a pseudo-terminal `index` draws rich bars on stderr; piped, it stays quiet."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkernel", "index", demo_corpus],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the terminal closed: the child is gone
            break
        if not data:
            break
        seen += data
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    screen = seen.decode("utf-8", "replace")
    plain = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", screen)
    # a drawn bar per stage, each reaching its end (n/n)
    assert re.search(r"demo: embedding\s+━+\s+(\d+)/\1\b", plain), plain[-2000:]
    assert re.search(r"demo: writing files\s+━+\s+3/3\b", plain), plain[-2000:]

    piped = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "index", demo_corpus, "--force"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert piped.returncode == 0
    assert "━" not in piped.stderr
