"""`index` from a git server that accepts the connection and never answers: the fetch
(`index`, and `update`, which fetches the same way) is killed after the stall limit with
one clear line (exit 2), over http:// and git://; the freshness probe of `corpora` gives
up too; local sources are unaffected."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxkernel.corpus import get_corpus
from ctxkernel.errors import UserError
from ctxkernel.sources import GitSource

from .conftest import CliResult, Repo

STALL = 2.0


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection, reads what comes, and
    never sends a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = int(self.sock.getsockname()[1])
        self.accepted = 0
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self.held.append(conn)  # kept open, never answered

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent(monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentServer]:
    monkeypatch.setenv("CTXKERNEL_GIT_STALL_S", str(STALL))
    server = SilentServer()
    yield server
    server.close()


def _urls(port: int) -> list[str]:
    return [f"http://127.0.0.1:{port}/cutlass.git", f"git://127.0.0.1:{port}/cutlass.git"]


@pytest.mark.parametrize("scheme", ["http", "git"])
def test_index_from_a_git_server_that_never_answers_stops(
    demo_corpus: str, silent: SilentServer, run_cli: Callable[..., CliResult], scheme: str
) -> None:
    url = next(u for u in _urls(silent.port) if u.startswith(scheme))
    t0 = time.monotonic()
    res = run_cli("index", demo_corpus, "--source", url)
    took = time.monotonic() - t0
    assert silent.accepted >= 1  # it did connect: this is the stall, not a refused port
    assert res.code == 2 and "Traceback" not in res.err
    errors = [line for line in res.err.splitlines() if line.startswith("ctxkernel: error:")]
    assert len(errors) == 1 and f"no answer for {STALL:g} s" in errors[0], res.err
    assert "--source" in errors[0]
    assert took < STALL + 10, took


def test_freshness_probe_of_a_silent_server_gives_up(
    demo_corpus: str, silent: SilentServer
) -> None:
    source = GitSource(get_corpus(demo_corpus), _urls(silent.port)[1], "main")
    t0 = time.monotonic()
    assert source.upstream_version() is None
    assert time.monotonic() - t0 < STALL + 5


def test_local_git_sources_still_fetch_with_the_stall_limit(
    demo_corpus: str, upstream: Repo, silent: SilentServer
) -> None:
    corpus = get_corpus(demo_corpus)
    for url in (str(upstream.path), upstream.path.as_uri()):
        snapshot = GitSource(corpus, url, "main").materialize()
        assert snapshot.version == upstream.repo.head.commit.hexsha
        assert {f.path for f in snapshot.files} >= {"src/kernels.py", "include/copy.hpp"}
    assert GitSource(corpus, str(upstream.path), "main").upstream_version() == snapshot.version


@pytest.mark.parametrize("ref", ["main", "HEAD"])
def test_git_stall_fires_at_its_value_once_and_leaves_no_empty_clone(
    demo_corpus: str, silent: SilentServer, isolated_home: Path, ref: str
) -> None:
    """The limit fired after twice its value (the default branch asked for again after
    the stall) and left an empty repository in the clone folder, which the next run took
    for a clone to update."""
    source = GitSource(get_corpus(demo_corpus), _urls(silent.port)[0], ref)
    t0 = time.monotonic()
    with pytest.raises(UserError, match=f"no answer for {STALL:g} s"):
        source.materialize()
    took = time.monotonic() - t0
    assert silent.accepted == 1, silent.accepted  # asked once, not again after the stall
    assert took < 1.5 * STALL + 1, took
    assert not source.clone_dir().exists()
    clones = isolated_home / "cache" / "clones"
    assert not clones.is_dir() or not any(clones.iterdir())
