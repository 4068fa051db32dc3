"""`ctxkernel mcp` driven by the official MCP SDK client: the server is spawned over stdio
(and once over streamable HTTP, with its bearer token), lists the same tools as
ctxkernel.tools, answers each, and turns bad arguments into error results without dying.
``http_server`` starts the HTTP server for the HTTP security tests too."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from ctxkernel.tools import builtin_tools

from .conftest import DemoIndex, subprocess_env

ROOT = Path(__file__).resolve().parents[2]
ID_LINE = r"\[\d+\] demo:[\w/.-]+:\d+-\d+"


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def _run(main: Callable[[], Awaitable[None]]) -> None:
    anyio.run(main)


def _server_env(demo_index: DemoIndex) -> dict[str, str]:
    return subprocess_env(demo_index.env)


@pytest.mark.slow  # spawns a server that loads the embedding model: about 20 s on 2 cores
def test_mcp_stdio_lists_and_calls_every_tool(demo_index: DemoIndex, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ctxkernel", "mcp", "--index-dir", str(demo_index.index_dir)],
        env=_server_env(demo_index),
        cwd=str(ROOT),
    )
    errlog = (tmp_path / "server.err").open("w")

    async def main() -> None:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "ctxkernel"
            assert "list_corpora" in (init.instructions or "")

            listed = await session.list_tools()
            by_name = {t.name: t for t in listed.tools}
            assert list(by_name) == [t.name for t in builtin_tools()]
            for tool in builtin_tools():  # the same definitions, not re-declared
                assert by_name[tool.name].input_schema == tool.input_schema
                assert by_name[tool.name].description == tool.description

            calls: dict[str, dict[str, Any]] = {
                "list_corpora": {},
                "search": {"query": "XOR swizzle so a warp hits distinct banks", "k": 3},
                "grep": {"pattern": r"def advance", "corpus": "demo", "context": 1},
                "docs": {"topic": "make_tiled_copy"},
                "read": {"ref": "demo:src/kernels.py:6-12"},
            }
            for name, args in calls.items():
                result = await session.call_tool(name, args)
                text = _text(result)
                assert not result.is_error, (name, text)
                if name != "list_corpora":
                    assert "url: https://example.invalid/blob/" in text, (name, text)
            assert "demo:" in _text(await session.call_tool("list_corpora", {}))
            found = _text(await session.call_tool("search", calls["search"]))
            assert "demo:src/kernels.py:6-12" in found.splitlines()[2]

            # bad arguments: an error result the model can read, and the server lives on
            bad: list[tuple[str, dict[str, Any], str]] = [
                ("search", {"query": "x", "k": 0}, "k"),
                ("search", {}, "'query' is a required property"),
                ("grep", {"pattern": "(a+)+", "corpus": "demo"}, "nested quantifiers"),
                ("read", {"ref": "demo:../../etc/passwd"}, "not a corpus path"),
                ("read", {"ref": "nope:src/kernels.py"}, "not indexed"),
            ]
            for name, arguments, message in bad:
                result = await session.call_tool(name, arguments)
                assert result.is_error, (name, arguments)
                assert message in _text(result), (name, _text(result))
            with pytest.raises(MCPError, match="unknown tool"):  # a protocol error
                await session.call_tool("no_such_tool", {})
            assert len((await session.list_tools()).tools) == len(builtin_tools())

    _run(main)
    errlog.close()
    assert "Traceback" not in (tmp_path / "server.err").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"nothing listens on port {port} after {seconds} s")


@dataclass
class HttpServer:
    """A ``ctxkernel mcp --http`` process, with what it printed at start."""

    proc: subprocess.Popen[bytes]
    port: int
    err: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def printed(self, prefix: str) -> str:
        """The rest of the stderr line that starts with ``ctxkernel mcp: PREFIX``."""
        for line in self.err.read_text().splitlines():
            if line.startswith(f"ctxkernel mcp: {prefix}"):
                return line[len(f"ctxkernel mcp: {prefix}") :]
        raise AssertionError(f"no {prefix!r} line in:\n{self.err.read_text()}")

    @property
    def token(self) -> str:
        return self.printed("every request needs 'Authorization: Bearer TOKEN'; token: ")

    def client(self, token: str | None = None) -> httpx2.AsyncClient:
        """An HTTP client for the SDK's transport, carrying the server's token."""
        return httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=httpx2.Timeout(30, read=300),
        )


@contextmanager
def http_server(
    args: list[str], env: dict[str, str], tmp_path: Path, cwd: Path = ROOT
) -> Iterator[HttpServer]:
    """``ctxkernel mcp --http --no-warm ARGS`` on a free loopback port, stopped (SIGTERM,
    the way an operator stops it) at the end."""
    port = _free_port()
    err = tmp_path / f"server-{port}.err"
    with err.open("wb") as errfile:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxkernel", "mcp", "--http", "--port", str(port),
             "--no-warm", *args],
            env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=errfile,
        )  # fmt: skip
    try:
        _wait_for_port(port, proc)
        yield HttpServer(proc, port, err)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_mcp_streamable_http(demo_index: DemoIndex, tmp_path: Path) -> None:
    args = ["--index-dir", str(demo_index.index_dir)]
    with http_server(args, _server_env(demo_index), tmp_path) as server:

        async def main() -> None:
            async with (
                server.client() as http,
                streamable_http_client(server.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                names = [t.name for t in (await session.list_tools()).tools]
                assert names == [t.name for t in builtin_tools()]
                ok = await session.call_tool("grep", {"pattern": "RingBuffer", "corpus": "demo"})
                assert not ok.is_error and "demo:src/kernels.py:" in _text(ok)
                bad = await session.call_tool("grep", {"pattern": "x"})
                assert bad.is_error and "'corpus' is a required property" in _text(bad)

        _run(main)
    assert "Traceback" not in server.err.read_text()


@pytest.mark.parametrize("flag", ["--help"])
def test_mcp_command_help(flag: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "mcp", flag],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "claude mcp add ctxkernel -- ctxkernel mcp" in out.stdout
