"""`ctxkernel mcp --http` as a door: every request needs the bearer token made at start
(401 without it or with another, over real HTTP to 127.0.0.1), the token is kept in a
0600 file under the ctxkernel home and removed at stop, an operator's --token-file must
be private, and check_kernel takes a problem only under the --problems-root folders."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import stat
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ctxkernel.mcp.http import is_loopback
from ctxkernel.mcp.roots import ProblemRoots
from ctxkernel.tools import ToolError

from .conftest import DemoIndex, subprocess_env
from .test_mcp_server import HttpServer, http_server

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "http-test", "version": "1"}},
}  # fmt: skip


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def _post(url: str, headers: dict[str, str] | None = None, body: Any = INITIALIZE) -> int:
    """The status of one raw POST (an MCP initialize, unless ``body`` says otherwise)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream", **(headers or {})},
        method="POST",
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A problems root holding a copy of the vector_add example, a link out of the root
    to the softmax example, and a folder of its own beside it (outside)."""
    base = tmp_path_factory.mktemp("mcp-roots")
    allowed = base / "allowed"
    allowed.mkdir()
    shutil.copytree(EXAMPLES / "vector_add", allowed / "vector_add")
    (allowed / "escape").symlink_to(EXAMPLES / "softmax")
    shutil.copytree(EXAMPLES / "vector_add", base / "outside")
    return allowed


@pytest.fixture(scope="module")
def server(
    demo_index: DemoIndex, roots: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    tmp = tmp_path_factory.mktemp("mcp-http")
    env = subprocess_env(demo_index.env)
    env.update(CTXKERNEL_RUNS=str(tmp / "runs"), TRITON_CACHE_DIR=str(tmp / "triton"),
               TRITON_DEFAULT_FP_FUSION="1")  # fmt: skip
    args = ["--index-dir", str(demo_index.index_dir), "--check", "--device", "cpu",
            "--backend", "triton", "--problems-root", str(roots)]  # fmt: skip
    with http_server(args, env, tmp) as running:
        yield running
    assert "Traceback" not in running.err.read_text()


def test_http_without_a_token_is_refused(server: HttpServer) -> None:
    assert _post(server.url) == 401
    assert _post(f"http://127.0.0.1:{server.port}/") == 401  # every path, not only /mcp
    assert _post(server.url, {"Authorization": "Basic " + server.token}) == 401


def test_http_with_a_wrong_token_is_refused(server: HttpServer) -> None:
    token = server.token
    for wrong in ("", "x", token[:-1], token + "x", token.upper(), "secret " + token):
        assert _post(server.url, {"Authorization": f"Bearer {wrong}"}) == 401, wrong


def test_http_with_the_token_is_served(server: HttpServer) -> None:
    assert _post(server.url, {"Authorization": f"Bearer {server.token}"}) == 200
    assert _post(server.url, {"Authorization": f"bearer  {server.token}"}) == 200

    async def main() -> None:
        async with (
            server.client() as http,
            streamable_http_client(server.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            ok = await session.call_tool("grep", {"pattern": "RingBuffer", "corpus": "demo"})
            assert not ok.is_error and "demo:src/kernels.py:" in _text(ok)

    anyio.run(main)


def test_http_token_file_is_private_and_under_the_home(
    server: HttpServer, demo_index: DemoIndex
) -> None:
    saved = Path(server.printed("token saved in ").split(" (mode")[0])
    assert saved.is_relative_to(demo_index.env["CTXKERNEL_HOME"])
    assert saved.read_text().strip() == server.token
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    assert stat.S_IMODE(saved.parent.stat().st_mode) == 0o700
    assert len(server.token) >= 40  # secrets.token_urlsafe(32): 32 random bytes


def test_http_token_file_is_removed_when_the_server_stops(
    demo_index: DemoIndex, tmp_path: Path
) -> None:
    with http_server(["--index-dir", str(demo_index.index_dir)],
                     subprocess_env(demo_index.env), tmp_path) as running:  # fmt: skip
        saved = Path(running.printed("token saved in ").split(" (mode")[0])
        assert saved.exists()
    assert running.proc.returncode == -signal.SIGTERM  # stopped by it, after a clean stop
    assert not saved.exists()
    assert "Traceback" not in running.err.read_text()


def test_http_operator_token_file(demo_index: DemoIndex, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token = "operator-chosen-token-0123456789"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    args = ["--index-dir", str(demo_index.index_dir), "--token-file", str(token_file)]
    with http_server(args, subprocess_env(demo_index.env), tmp_path) as running:
        assert _post(running.url, {"Authorization": f"Bearer {token}"}) == 200
        assert _post(running.url) == 401
        assert token not in running.err.read_text()  # the operator's: never printed
    assert token_file.read_text() == token + "\n"  # and never removed


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        ("operator-chosen-token-0123456789", 0o644, "is open to others (mode 644): chmod 600"),
        ("short", 0o600, "at least 16 printable ASCII characters"),
        ("two words and more than sixteen", 0o600, "without spaces"),
        ("", 0o600, "at least 16"),
    ],
)
def test_http_bad_token_file_is_a_clean_error(
    demo_index: DemoIndex, tmp_path: Path, content: str, mode: int, message: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(content)
    token_file.chmod(mode)
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "mcp", "--http", "--no-warm",
         "--token-file", str(token_file), "--index-dir", str(demo_index.index_dir)],
        capture_output=True, text=True, env=subprocess_env(demo_index.env), cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    "args",
    [["--token-file", "x"], ["--problems-root", "."]],
    ids=["token-file-without-http", "problems-root-without-check"],
)
def test_mcp_option_that_needs_another_is_a_clean_error(
    demo_index: DemoIndex, args: list[str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "mcp", "--no-warm", *args],
        capture_output=True, text=True, env=subprocess_env(demo_index.env), cwd=ROOT,
        stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_http_busy_port_is_a_clean_error(demo_index: DemoIndex) -> None:
    """uvicorn bound the port inside the event loop and exited from there: a busy port
    was a traceback and exit 1, and left the token file behind."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "ctxkernel", "mcp", "--http", "--no-warm", "--port",
             str(port), "--index-dir", str(demo_index.index_dir)],
            capture_output=True, text=True, env=subprocess_env(demo_index.env), cwd=ROOT,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"ctxkernel: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    home = Path(demo_index.env["CTXKERNEL_HOME"])
    assert not (home / "cache" / "mcp" / f"http-{port}.token").exists()


def test_only_loopback_is_loopback() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com", "localhost.example.com"):
        assert not is_loopback(host), host


def _check_call(server: HttpServer, problem: str) -> tuple[bool, str]:
    source = (EXAMPLES / "vector_add" / "solution_triton.py").read_text()
    outcome: list[tuple[bool, str]] = []

    async def main() -> None:
        async with (
            server.client() as http,
            streamable_http_client(server.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            args = {"source": source, "problem": problem}
            result = await session.call_tool("check_kernel", args)
            outcome.append((bool(result.is_error), _text(result)))

    anyio.run(main)
    return outcome[0]


@pytest.mark.parametrize(
    "where",
    ["outside", "link out of the root", "dot-dot out of the root", "examples (absolute)"],
)
def test_check_kernel_problem_outside_the_roots_is_refused(
    server: HttpServer, roots: Path, where: str
) -> None:
    problem = {
        "outside": str(roots.parent / "outside"),
        "link out of the root": str(roots / "escape"),
        "dot-dot out of the root": str(roots / "vector_add" / ".." / ".." / "outside"),
        "examples (absolute)": str(EXAMPLES / "vector_add" / "problem.py"),
    }[where]
    is_error, text = _check_call(server, problem)
    assert is_error, text
    assert "is outside the folders this server takes problems from" in text
    assert str(roots) in text and "--problems-root" in text


def test_check_kernel_problem_inside_the_roots_is_checked(server: HttpServer, roots: Path) -> None:
    is_error, text = _check_call(server, str(roots / "vector_add"))
    assert not is_error, text
    assert text.splitlines()[0] == "version 1: PASSED", text


def test_problem_roots_default_to_the_current_directory_and_allow_the_given_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    given = EXAMPLES / "softmax"
    roots = ProblemRoots([], given)
    assert roots.admit("mine") == str(tmp_path.resolve() / "mine")
    assert roots.admit(str(given / "problem.py")) == str(given.resolve() / "problem.py")
    with pytest.raises(ToolError, match="outside the folders"):
        roots.admit(str(EXAMPLES / "vector_add"))
    with pytest.raises(ToolError, match="not a usable path"):
        roots.admit("bad\0path")
    assert roots.roots == [tmp_path.resolve()]
