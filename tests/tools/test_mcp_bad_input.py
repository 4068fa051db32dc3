"""`ctxkernel mcp` spoken to in raw JSON-RPC over stdio, for requests an SDK client would
not send: a lone surrogate escape in a string (valid JSON syntax, not Unicode) and a call
to a tool the server never listed."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

    def call_line(self, name: str, arguments_json: str) -> str:
        self.next_id += 1
        head = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call"}
        # the arguments go in as written: json.dumps would never write a lone surrogate escape
        return (
            json.dumps(head)[:-1]
            + f', "params": {{"name": "{name}", "arguments": {arguments_json}}}}}'
        )


@pytest.fixture(scope="module")
def raw_server(
    demo_index: DemoIndex, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RawServer]:
    err = (tmp_path_factory.mktemp("mcp-raw") / "server.err").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxkernel",
            "mcp",
            "--no-warm",
            "--index-dir",
            str(demo_index.index_dir),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        env=subprocess_env(demo_index.env),
        cwd=str(ROOT),
    )
    server = RawServer(proc)
    server.send(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"}}}
    )  # fmt: skip
    assert server.reply() is not None
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield server
    proc.kill()
    proc.wait()
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
