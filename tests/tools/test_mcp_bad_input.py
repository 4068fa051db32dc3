"""`ctxkernel mcp` spoken to in raw JSON-RPC over stdio, for requests an SDK client would
not send: a lone surrogate escape in a string (valid JSON syntax, not Unicode), a call to
a tool the server never listed, lines nested 100,000 deep, a 200 MB line, params that are
not an object, lines that are not JSON or not requests, a handler that raises. Each
request with an id gets a JSON-RPC reply with that id, notifications get none, and the
server answers the next request after every one of them."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from .conftest import DemoIndex, subprocess_env

ROOT = Path(__file__).resolve().parents[2]


class RawServer:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.next_id = 0

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def send_line(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def reply(self, seconds: float = 30) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], deadline - time.monotonic())
            if not ready:
                break
            line = self.proc.stdout.readline()
            if not line:
                return None
            message: dict[str, Any] = json.loads(line)
            if "id" in message:
                return message
        return None

    def request(self, method: str, params: Any = None) -> dict[str, Any] | None:
        """Send one well-formed request and wait for its reply."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.reply()

    def answers(self) -> bool:
        """Whether the server still answers an ordinary request (with the right id)."""
        reply = self.request("tools/list")
        return reply is not None and reply["id"] == self.next_id and "result" in reply

    def call_line(self, name: str, arguments_json: str) -> str:
        self.next_id += 1
        head = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call"}
        # the arguments go in as written: json.dumps would never write a lone surrogate escape
        return (
            json.dumps(head)[:-1]
            + f', "params": {{"name": "{name}", "arguments": {arguments_json}}}}}'
        )


INITIALIZE = {
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw-test", "version": "1"}},
}  # fmt: skip


def spawn(argv: list[str], env: dict[str, str], err: IO[str]) -> RawServer:
    """A server started with ``argv``, initialized over raw pipes."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env, cwd=str(ROOT)
    )
    server = RawServer(proc)
    server.send(INITIALIZE)
    assert server.reply() is not None
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return server


def mcp_argv(demo_index: DemoIndex) -> list[str]:
    return [sys.executable, "-m", "ctxkernel", "mcp", "--no-warm", "--index-dir",
            str(demo_index.index_dir)]  # fmt: skip


@pytest.fixture(scope="module")
def raw_server(
    demo_index: DemoIndex, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RawServer]:
    err = (tmp_path_factory.mktemp("mcp-raw") / "server.err").open("w")
    server = spawn(mcp_argv(demo_index), subprocess_env(demo_index.env), err)
    yield server
    server.proc.kill()
    server.proc.wait()
    err.close()
    assert "Traceback" not in Path(err.name).read_text()


def test_mcp_docs_with_a_lone_surrogate_gets_a_reply(raw_server: RawServer) -> None:
    raw_server.send_line(raw_server.call_line("docs", '{"topic": "\\ud800make_tiled_copy"}'))
    reply = raw_server.reply()
    assert reply is not None, "no reply to a request holding a lone surrogate"
    assert reply["id"] == raw_server.next_id and "result" in reply
    text = reply["result"]["content"][0]["text"]
    assert "\ufffd" in text  # the lone surrogate arrived as U+FFFD, like undecodable bytes
    # a paired surrogate (an emoji written as two escapes) is left as it is
    raw_server.send_line(raw_server.call_line("docs", '{"topic": "\\ud83d\\ude00"}'))
    paired = raw_server.reply()
    assert paired is not None and "\U0001f600" in paired["result"]["content"][0]["text"]
    # and the server still answers ordinary calls
    raw_server.send_line(raw_server.call_line("docs", '{"topic": "make_tiled_copy"}'))
    ok = raw_server.reply()
    assert ok is not None and not ok["result"]["isError"]
    assert "demo:include/copy.hpp" in ok["result"]["content"][0]["text"]


def test_mcp_call_to_an_unknown_tool_is_a_protocol_error(raw_server: RawServer) -> None:
    raw_server.send_line(raw_server.call_line("no_such_tool", "{}"))
    reply = raw_server.reply()
    assert reply is not None and "result" not in reply
    assert reply["error"]["code"] == -32602  # invalid params, as the MCP spec asks
    assert "unknown tool 'no_such_tool'" in reply["error"]["message"]
    assert "search" in reply["error"]["message"]


def test_mcp_over_files_not_pipes(demo_index: DemoIndex, tmp_path: Path) -> None:
    """stdin and stdout that are files (a recorded session replayed, its output kept) take
    the threaded path, not the pipe transport: the requests before the end of the file are
    answered (the end of stdin ends the session, as it does on a pipe)."""
    requests = tmp_path / "requests.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "file-test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ]  # fmt: skip
    requests.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "replies.jsonl"
    with requests.open("rb") as stdin, out.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "ctxkernel", "mcp", "--no-warm", "--index-dir",
             str(demo_index.index_dir)],
            stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
            env=subprocess_env(demo_index.env), cwd=str(ROOT), timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    replies = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    assert [r.get("id") for r in replies] == [0, 1]
    assert "search" in {t["name"] for t in replies[1]["result"]["tools"]}


def test_requests_written_then_stdin_closed_are_all_answered(
    demo_index: DemoIndex, tmp_path: Path
) -> None:
    """`cat requests.jsonl | ctxkernel mcp`: the client writes its requests and closes the
    pipe at once; the end of stdin ends the session only after the last request's answer
    went out (it used to end it while the SDK was still answering: a lost reply)."""
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pipe-test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "last", "method": "tools/call",
         "params": {"name": "search", "arguments": {"query": "swizzle", "k": 2}}},
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "mcp", "--no-warm", "--index-dir",
         str(demo_index.index_dir)],
        input="".join(json.dumps(x) + "\n" for x in lines).encode(),
        capture_output=True, env=subprocess_env(demo_index.env), cwd=str(ROOT), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    replies = [json.loads(x) for x in done.stdout.decode().splitlines() if x.strip()]
    assert [r.get("id") for r in replies] == [0, 1, "last"]
    assert "result" in replies[2] and replies[2]["result"]["content"]


def _error_of(reply: dict[str, Any] | None) -> tuple[Any, int, str]:
    assert reply is not None, "no reply"
    assert "result" not in reply, reply
    return reply["id"], reply["error"]["code"], reply["error"]["message"]


def test_deeply_nested_line_does_not_kill_the_server(raw_server: RawServer) -> None:
    """json.loads recurses once per level: 100,000 ``[`` ended the server with
    RecursionError (and every later request went unanswered)."""
    raw_server.send_line("[" * 100_000)
    assert _error_of(raw_server.reply())[:2] == (None, -32700)  # never closed: not JSON
    assert raw_server.answers()
    raw_server.send_line("[" * 100_000 + "]" * 100_000)
    rid, code, message = _error_of(raw_server.reply())
    assert (rid, code) == (None, -32600) and "nested deeper than 64 levels" in message
    assert raw_server.answers()
    # a request nested too deep in its arguments: the reply carries its id
    deep = "[" * 5000 + "]" * 5000
    raw_server.send_line(
        '{"jsonrpc": "2.0", "id": "deep", "method": "tools/call", "params": '
        f'{{"name": "search", "arguments": {{"query": {deep}}}}}}}'
    )
    assert _error_of(raw_server.reply())[:2] == ("deep", -32600)
    assert raw_server.answers()


def test_brackets_inside_strings_do_not_count_as_nesting(raw_server: RawServer) -> None:
    query = "[{" * 3000 + '\\"' + "}]" * 10  # an escaped quote does not end the string
    reply = raw_server.request("tools/call", {"name": "grep", "arguments": {
        "pattern": query, "corpus": "demo"}})  # fmt: skip
    assert reply is not None and "result" in reply, reply  # the tool's answer, not the wire's


def test_request_with_string_params_gets_an_error_with_its_id(raw_server: RawServer) -> None:
    for params, kind in (('"abc"', "a string"), ("7", "a number"), ("[1, 2]", "an array"),
                         ("true", "a boolean")):  # fmt: skip
        raw_server.send_line(
            f'{{"jsonrpc": "2.0", "id": "p-{kind}", "method": "tools/list", "params": {params}}}'
        )
        rid, code, message = _error_of(raw_server.reply())
        assert (rid, code) == (f"p-{kind}", -32600), message
        assert f"params must be an object, not {kind}" in message
    assert raw_server.answers()


@pytest.mark.parametrize(
    ("line", "rid", "code", "message"),
    [
        ('{"jsonrpc": "2.0", "id": 41, "method": "no/such/method"}', 41, -32601, "not found"),
        ("this is not json", None, -32700, "not JSON"),
        ('{"jsonrpc": "2.0", "id": 43, "method": "tools/list"', None, -32700, "not JSON"),
        ('[{"jsonrpc": "2.0", "id": 44, "method": "tools/list"}]', None, -32600, "batch"),
        ('"a string"', None, -32600, "not an object"),
        ('{"jsonrpc": "1.0", "id": 46, "method": "tools/list"}', 46, -32600, '"2.0"'),
        ('{"jsonrpc": "2.0", "id": 47, "method": 5}', 47, -32600, "method must be a string"),
        ('{"jsonrpc": "2.0", "id": 48}', 48, -32600, "no method"),
        ('{"jsonrpc": "2.0", "id": [49], "method": "tools/list"}', None, -32600, "id must be"),
        ('{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', None, -32600, "not null"),
        ('{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', None, -32600, "not a number"),
        ('{"jsonrpc": "2.0", "id": 50, "method": "tools/list"}' + " " * 100, 50, 0, ""),
    ],
    ids=[
        "unknown-method",
        "not-json",
        "cut-short",
        "batch",
        "not-object",
        "jsonrpc-1.0",
        "method-number",
        "no-method",
        "id-array",
        "id-null",
        "id-float",
        "trailing-spaces",
    ],
)
def test_every_request_gets_a_reply(
    raw_server: RawServer, line: str, rid: Any, code: int, message: str
) -> None:
    raw_server.send_line(line)
    reply = raw_server.reply()
    assert reply is not None, f"no reply to {line!r}"
    if code == 0:
        assert reply["id"] == rid and "result" in reply
    else:
        assert _error_of(reply)[:2] == (rid, code), reply
        assert message in reply["error"]["message"]
    assert raw_server.answers()


def test_notifications_get_no_reply_even_when_malformed(raw_server: RawServer) -> None:
    for line in ('{"jsonrpc": "2.0", "method": "notifications/nope"}',
                 '{"jsonrpc": "2.0", "method": "notifications/nope", "params": "x"}',
                 '{"jsonrpc": "2.0", "id": 900, "result": "not an object"}',  # a bad response
                 "", "   "):  # fmt: skip
        raw_server.send_line(line)
    # the next reply is the answer to this request: nothing was sent for those lines
    reply = raw_server.request("tools/list")
    assert reply is not None and reply["id"] == raw_server.next_id, reply


def _vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_200mb_line_is_refused_without_being_held(demo_index: DemoIndex, tmp_path: Path) -> None:
    """A line is read in bounded chunks: one of 200 MB is dropped as it streams in (the
    asyncio reader used to take lines of up to 1 GiB whole) and answered with an error
    carrying the id at its start; the server's peak memory does not follow it."""
    with (tmp_path / "server.err").open("w") as err:
        server = spawn(mcp_argv(demo_index), subprocess_env(demo_index.env), err)
        try:
            assert server.answers()
            before = _vm_kib(server.proc.pid, "VmHWM")
            stdin = server.proc.stdin
            assert stdin is not None
            stdin.write(b'{"jsonrpc": "2.0", "id": "huge", "method": "tools/call", "params": '
                        b'{"name": "search", "arguments": {"query": "')  # fmt: skip
            block = b"x" * (1 << 20)  # the one buffer of this test: 1 MiB, written 200 times
            for _ in range(200):
                stdin.write(block)
            stdin.write(b'"}}}\n')
            stdin.flush()
            rid, code, message = _error_of(server.reply(seconds=120))
            assert (rid, code) == ("huge", -32600)
            assert "refused: the limit is 4194304" in message
            grown = _vm_kib(server.proc.pid, "VmHWM") - before
            assert grown < 64 * 1024, f"peak memory grew by {grown} KiB for a dropped line"
            assert server.answers()
            # a line under the limit (3 MiB) is read whole: the tool answers it
            query = "y" * (3 << 20)
            reply = server.request("tools/call", {"name": "search", "arguments": {"query": query}})
            assert reply is not None and reply["result"]["isError"], reply
            assert "too long" in reply["result"]["content"][0]["text"]
        finally:
            server.proc.kill()
            server.proc.wait()
    assert "Traceback" not in (tmp_path / "server.err").read_text()


BROKEN_SERVER = """
from ctxkernel.mcp.server import serve
from ctxkernel.tools import Tool, ToolSet

class Broken(ToolSet):
    def call(self, name, arguments=None):
        raise RuntimeError("planted: a bug below the tool layer")

boom = Tool("boom", "Always fails.", {"type": "object", "properties": {}}, lambda ws, a: "")
serve(toolset=Broken(tools=[boom]), warm=False)
"""


def test_handler_that_raises_gets_an_error_reply(demo_index: DemoIndex, tmp_path: Path) -> None:
    with (tmp_path / "server.err").open("w") as err:
        server = spawn([sys.executable, "-c", BROKEN_SERVER], subprocess_env(demo_index.env), err)
        try:
            reply = server.request("tools/call", {"name": "boom", "arguments": {}})
            rid, code, message = _error_of(reply)
            assert (rid, code) == (server.next_id, -32603)
            assert "boom: internal error: RuntimeError: planted" in message
            assert server.answers()
        finally:
            server.proc.kill()
            server.proc.wait()
    logged = (tmp_path / "server.err").read_text()
    assert "boom failed: RuntimeError: planted" in logged and "Traceback" not in logged
