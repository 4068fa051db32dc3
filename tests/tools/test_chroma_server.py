"""A shared team index: a real `chroma run` server on 127.0.0.1, the demo corpus indexed
through it, then searched from a second index dir (a fresh machine's view) that has
nothing but the server: search in every mode, grep over chunk texts, read, docs, tools."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from retrieval.conftest import CliResult, Repo

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _chroma_cli() -> str:
    exe = Path(sys.executable).parent / "chroma"
    found = str(exe) if exe.is_file() else shutil.which("chroma")
    if not found:
        pytest.skip("the chroma CLI is not installed next to this Python")
    return found


@pytest.fixture
def chroma_url(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    log = (tmp_path / "chroma.log").open("wb")
    proc = subprocess.Popen(
        [_chroma_cli(), "run", "--path", str(tmp_path / "chroma-server"),
         "--host", "127.0.0.1", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"chroma run exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("the chroma server did not answer its heartbeat in 60 s")
            time.sleep(0.25)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.slow  # a chroma server, an index run and two caches: about 20 s on 2 cores
def test_index_and_search_through_a_chroma_server(
    chroma_url: str,
    demo_corpus: str,
    upstream: Repo,
    tmp_path: Path,
    run_cli: Callable[..., CliResult],
) -> None:
    first, second = tmp_path / "machine-a", tmp_path / "machine-b"
    indexed = run_cli("index", "demo", "--index-dir", first, "--chroma-url", chroma_url, "--json")
    assert indexed.code == 0, indexed.err
    report = json.loads(indexed.out.splitlines()[-1])
    assert report["chunks_total"] > 0
    assert not (first / "chroma").exists()  # the vectors live on the server only

    for mode in ("hybrid", "lexical", "dense"):
        found = run_cli(
            "search", "XOR swizzle so that a warp hits distinct banks", "--mode", mode,
            "--index-dir", first, "--chroma-url", chroma_url, "--json",
        )  # fmt: skip
        assert found.code == 0, (mode, found.err)
        top = json.loads(found.out.splitlines()[0])
        assert top["path"] == "src/kernels.py", (mode, top)

    # a fresh machine: no local cache, no files, only the server
    ws = Workspace(second, chroma_url)
    assert ws.store.corpora() == ["demo"]
    for mode in ("hybrid", "lexical", "dense"):
        hits = ws.search("ring of pipeline stages for a producer and a consumer", mode=mode).hits
        assert hits and hits[0].chunk.symbol == "RingBuffer", mode
    assert (second / "lexical" / "demo" / "meta.sqlite").is_file()  # rebuilt from the server

    grep = ws.grep("demo", r"def advance", context=1)
    assert grep.engine == "chunks"  # no files here: the chunk texts stand in
    assert [h.chunk.path for h in grep.hits] == ["src/kernels.py"]

    rng = ws.read("demo:src/kernels.py:6-8")
    assert rng.source == "chunks"
    assert rng.lines[0].startswith("def planted_swizzle_shared_memory_banks")

    docs = ws.docs("make_tiled_copy")
    assert docs.best is not None and docs.best.chunk.path == "include/copy.hpp"

    tools = ToolSet(ws)
    text = tools.run("docs", {"topic": "make_tiled_copy"})
    assert "demo:include/copy.hpp:" in text and "url: https://example.invalid/" in text
    assert "demo:src/kernels.py:" in tools.run("grep", {"pattern": "RingBuffer", "corpus": "demo"})
    assert "rebuilt from the index" in tools.run("read", {"ref": "demo:src/kernels.py:1-5"})

    # the CLI on the second machine
    shown = run_cli("show", "demo:src/kernels.py:6-6", "--index-dir", second,
                    "--chroma-url", chroma_url)  # fmt: skip
    assert shown.code == 0 and "planted_swizzle_shared_memory_banks" in shown.out

    # upstream moves on, the first machine updates, the second sees it at its next query
    upstream.write("src/late.py", "def planted_late_arrival_kernel(x):\n    return x\n")
    upstream.commit("add a late kernel")
    updated = run_cli("update", "demo", "--index-dir", first, "--chroma-url", chroma_url)
    assert updated.code == 0, updated.err
    late = ws.search("planted_late_arrival_kernel", mode="lexical", k=1).hits
    assert late and late[0].chunk.path == "src/late.py"


def test_unreachable_chroma_server_is_one_error_line(
    tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    port = _free_port()  # nothing listens there
    result = run_cli("search", "x", "--index-dir", tmp_path / "i",
                     "--chroma-url", f"http://127.0.0.1:{port}")  # fmt: skip
    assert result.code == 2
    assert result.err.startswith("ctxkernel: error:") and len(result.err.strip().splitlines()) == 1


def test_chroma_url_from_config_file(isolated_home: Path) -> None:
    from ctxkernel import config

    file = config.config_file()
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text('chroma_url = "http://127.0.0.1:1"\n')
    assert Workspace().settings.chroma_url == "http://127.0.0.1:1"
    assert Workspace(chroma_url="http://127.0.0.1:2").settings.chroma_url == "http://127.0.0.1:2"
