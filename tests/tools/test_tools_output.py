"""Each tool against an index of the demo corpus: citations (id and upstream URL) on every
hit, output under max_tokens cut only between hits or lines with a closing [cut: …] note,
read confined to the corpus (no '..', absolute paths or symlink escapes), grep's time
limits, and a tool_use round trip through the real anthropic SDK."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import anthropic
import pytest
from anthropic.types import ToolUseBlock
from retrieval.conftest import CliResult

from ctxkernel.tools import ToolSet, anthropic_tools, run_tool_use

from .conftest import DemoIndex

HEADER = re.compile(r"^\[(\d+)\] (demo:([\w/.-]+):(\d+)-(\d+))(?:  .*)?$")
NUMBERED = re.compile(r"^ *(\d+)[: ] (.*)$")


def _blocks(text: str) -> list[tuple[str, str, int, int, str, list[tuple[int, str]]]]:
    """(id, path, start, end, url, numbered lines) of each hit in a tool's text."""
    out: list[tuple[str, str, int, int, str, list[tuple[int, str]]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = HEADER.match(line)
        if not m:
            continue
        url = lines[i + 1]
        body: list[tuple[int, str]] = []
        for follow in lines[i + 2 :]:
            n = NUMBERED.match(follow)
            if not n or HEADER.match(follow):
                break
            body.append((int(n.group(1)), n.group(2)))
        out.append((m.group(2), m.group(3), int(m.group(4)), int(m.group(5)), url, body))
    return out


def _file_lines(demo_index: DemoIndex, path: str) -> list[str]:
    return (demo_index.upstream / path).read_text().splitlines()


def _assert_whole_lines(demo_index: DemoIndex, path: str, body: list[tuple[int, str]]) -> None:
    """Every numbered line is the file's line, whole: nothing is cut inside a line."""
    lines = _file_lines(demo_index, path)
    for number, text in body:
        assert text == lines[number - 1], (path, number)


def _assert_budget(text: str, max_tokens: int) -> None:
    assert len(text) <= max_tokens * 4, (len(text), max_tokens)


def test_search_cites_every_hit(toolset: ToolSet, demo_index: DemoIndex) -> None:
    text = toolset.run("search", {"query": "XOR swizzle so a warp hits distinct banks", "k": 4})
    blocks = _blocks(text)
    assert len(blocks) == 4
    assert blocks[0][0].startswith("demo:src/kernels.py:")
    for _, path, start, end, url, body in blocks:
        assert url.startswith("url: https://example.invalid/blob/")
        assert url.endswith(f"/{path}#L{start}-L{end}")
        assert [n for n, _ in body] == list(range(start, end + 1))  # whole hits, numbered
        _assert_whole_lines(demo_index, path, body)
    assert "[cut:" not in text


def test_search_is_cut_between_hits_under_the_budget(
    toolset: ToolSet, demo_index: DemoIndex
) -> None:
    text = toolset.run(
        "search", {"query": "pipeline stage barrier copy", "k": 20, "max_tokens": 400}
    )
    _assert_budget(text, 400)
    blocks = _blocks(text)
    assert 1 <= len(blocks) < 20
    for _, path, start, end, _, body in blocks:
        assert [n for n, _ in body] == list(range(start, end + 1))
        _assert_whole_lines(demo_index, path, body)
    last = text.splitlines()[-1]
    assert last.startswith(f"[cut: {20 - len(blocks)} more hits not shown;")
    assert "demo:src/examples/pipeline.py:" in last  # ids of what was left out


def test_search_lines_per_hit_and_filters(toolset: ToolSet) -> None:
    text = toolset.run(
        "search", {"query": "RingBuffer advance", "lines_per_hit": 2, "k": 1, "kind": "source"}
    )
    _, path, start, end, _, body = _blocks(text)[0]
    assert path == "src/kernels.py" and len(body) == 2
    assert f"more lines: read demo:{path}:{start + 2}-{end}" in text
    examples = toolset.run("search", {"query": "stage", "kind": "example", "k": 3})
    assert {b[1] for b in _blocks(examples)} == {"src/examples/pipeline.py"}
    none = toolset.run("search", {"query": "zzzqqq", "mode": "lexical"})
    assert none.startswith("No results for 'zzzqqq'")


def test_search_unknown_corpus_is_an_error(toolset: ToolSet) -> None:
    result = toolset.call("search", {"query": "x", "corpus": "nope"})
    assert result.is_error and "corpus 'nope' is not indexed (indexed: demo)" in result.text


def test_grep_marks_matches_and_cites(toolset: ToolSet, demo_index: DemoIndex) -> None:
    text = toolset.run("grep", {"pattern": r"def advance", "corpus": "demo", "context": 1})
    [(_, path, start, end, url, body)] = _blocks(text)
    lines = _file_lines(demo_index, path)
    line = lines.index("    def advance(self):") + 1
    assert (start, end) == (line - 1, line + 1)
    assert url.endswith(f"#L{line - 1}-L{line + 1}")
    assert f"{line}: " in text and f"{line - 1}  " in text  # match vs context lines
    _assert_whole_lines(demo_index, path, body)


def test_grep_cut_by_budget_and_by_max_matches(toolset: ToolSet, demo_index: DemoIndex) -> None:
    text = toolset.run("grep", {"pattern": "return buf", "corpus": "demo", "context": 0,
                                "max_tokens": 300})  # fmt: skip
    _assert_budget(text, 300)
    blocks = _blocks(text)
    assert 1 <= len(blocks) < 40
    for _, path, _, _, _, body in blocks:
        _assert_whole_lines(demo_index, path, body)
    assert text.splitlines()[-1].startswith(f"[cut: {40 - len(blocks)} more hits not shown;")

    capped = toolset.run("grep", {"pattern": "return buf", "corpus": "demo", "max_matches": 3})
    assert len(_blocks(capped)) <= 3
    assert capped.splitlines()[-1].startswith("[cut: stopped early: max results (3)")


def test_grep_time_limit_is_honoured(toolset: ToolSet) -> None:
    # the engine's own limit: a limit shorter than starting ripgrep stops at once
    text = toolset.run("grep", {"pattern": "buf", "corpus": "demo", "timeout_s": 0.001})
    assert "time limit (0.001 s)" in text.splitlines()[-1]


def test_grep_gives_up_on_an_engine_that_does_not_answer(
    toolset: ToolSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def stuck(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        raise RuntimeError("released")

    monkeypatch.setattr(toolset.workspace, "grep", stuck)
    t0 = time.monotonic()
    try:
        result = toolset.call("grep", {"pattern": "x", "corpus": "demo", "timeout_s": 0.2})
    finally:
        release.set()
    assert time.monotonic() - t0 < 5
    assert result.is_error and "no answer within 0.2 s" in result.text


def test_grep_rejects_catastrophic_patterns_whatever_the_engine(toolset: ToolSet) -> None:
    result = toolset.call("grep", {"pattern": r"(\w+\.)+\w+$", "corpus": "demo"})
    assert result.is_error and "nested quantifiers" in result.text and "[\\w.]+" in result.text


def test_docs_best_match_alternatives_and_suggestions(toolset: ToolSet) -> None:
    text = toolset.run("docs", {"topic": "make_tiled_copy"})
    assert text.startswith("docs 'make_tiled_copy': best match by exact name.")
    [(_, path, start, end, url, body)] = _blocks(text)
    assert path == "include/copy.hpp" and url.endswith(f"#L{start}-L{end}")
    assert any("make_tiled_copy(Atom const& atom" in line for _, line in body)

    typo = toolset.run("docs", {"topic": "RingBufer"})
    assert "Did you mean: RingBuffer" in typo

    cut = toolset.run("docs", {"topic": "make_tiled_copy", "max_tokens": 200})
    _assert_budget(cut, 200)
    assert cut.splitlines()[-1].startswith("[cut: lines ")


def test_read_numbered_lines_with_url(toolset: ToolSet, demo_index: DemoIndex) -> None:
    text = toolset.run("read", {"ref": "demo:src/kernels.py:6-12"})
    lines = text.splitlines()
    assert lines[0] == "demo:src/kernels.py:6-12 of 35"
    assert lines[1].startswith("url: https://example.invalid/blob/") and lines[1].endswith(
        "/src/kernels.py#L6-L12"
    )
    body = [(int(m.group(1)), m.group(2)) for m in map(NUMBERED.match, lines[2:-1]) if m]
    assert [n for n, _ in body] == list(range(6, 13))
    _assert_whole_lines(demo_index, "src/kernels.py", body)
    assert lines[-1] == "(file continues: read demo:src/kernels.py:13-35)"
    # start_line/end_line override the range in the ref
    over = toolset.run("read", {"ref": "demo:src/kernels.py:6-12", "start_line": 1, "end_line": 2})
    assert over.splitlines()[0] == "demo:src/kernels.py:1-2 of 35"


def test_read_is_cut_at_a_line_with_the_id_of_the_rest(
    toolset: ToolSet, demo_index: DemoIndex
) -> None:
    text = toolset.run("read", {"ref": "demo:src/examples/pipeline.py", "max_tokens": 300})
    _assert_budget(text, 300)
    lines = text.splitlines()
    body = [(int(m.group(1)), m.group(2)) for m in map(NUMBERED.match, lines[2:-1]) if m]
    _assert_whole_lines(demo_index, "src/examples/pipeline.py", body)
    shown = body[-1][0]
    total = len(_file_lines(demo_index, "src/examples/pipeline.py"))
    assert lines[0] == f"demo:src/examples/pipeline.py:1-{shown} of {total}"
    assert lines[1].endswith(f"#L1-L{shown}")
    assert lines[-1] == (
        f"[cut: lines {shown + 1}-{total} not shown; read "
        f"demo:src/examples/pipeline.py:{shown + 1}-{total} or raise max_tokens]"
    )


@pytest.mark.parametrize(
    "ref",
    [
        "demo:../upstream/src/kernels.py",
        "demo:src/../../etc/passwd",
        "demo:/etc/passwd",
        "demo:~/.ssh/id_rsa",
        "demo:src\\..\\..\\x",
        "demo:C:/Windows/win.ini",
    ],
)
def test_read_rejects_paths_that_leave_the_corpus(toolset: ToolSet, ref: str) -> None:
    result = toolset.call("read", {"ref": ref})
    assert result.is_error and "is not a corpus path" in result.text


def test_read_rejects_files_not_in_the_index(toolset: ToolSet) -> None:
    missing = toolset.call("read", {"ref": "demo:other/ignored.py"})
    assert missing.is_error and "is not an indexed file" in missing.text
    bad = toolset.call("read", {"ref": "demo:src/kernels.py:9-3"})
    assert bad.is_error and "start <= end" in bad.text


@pytest.mark.parametrize("what", ["file", "folder"])
def test_read_refuses_a_symlink_out_of_the_corpus(
    toolset: ToolSet, swapped: Callable[[str], None], what: str
) -> None:
    assert "make_tiled_copy" in toolset.run("read", {"ref": "demo:include/copy.hpp"})
    swapped(what)
    result = toolset.call("read", {"ref": "demo:include/copy.hpp"})
    assert result.is_error and "resolves outside the corpus" in result.text
    assert "TOP SECRET" not in result.text


def test_list_corpora(toolset: ToolSet) -> None:
    text = toolset.run("list_corpora", {})
    assert text.splitlines()[0].startswith("Corpora")
    demo = next(line for line in text.splitlines() if line.startswith("- demo:"))
    assert "A corpus the tests build." in demo
    assert re.search(r"indexed \d{4}-\d\d-\d\d: 4 files, \d+ chunks, git version", text)
    assert "(not indexed: `ctxkernel index ptx`)" in text  # the built-in definitions
    small = toolset.run("list_corpora", {"max_tokens": 200})
    _assert_budget(small, 200)
    assert small.splitlines()[-1].startswith("[cut: ")


def test_tools_run_from_the_cli(
    demo_defined: str, demo_index: DemoIndex, run_cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    out = run_cli("tools", "run", "grep", "--args", '{"pattern": "RingBuffer", "corpus": "demo"}',
                  "--index-dir", demo_index.index_dir)  # fmt: skip
    assert out.code == 0 and "[1] demo:src/kernels.py:" in out.out
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ref": "demo:../x"}))
    err = run_cli("tools", "run", "read", "--input", args, "--index-dir", demo_index.index_dir)
    assert err.code == 2 and err.err.startswith("ctxkernel: error: read: '../x' is not a corpus")
    js = run_cli("tools", "run", "docs", "--args", '{"topic": "RingBuffer"}', "--json",
                 "--index-dir", demo_index.index_dir)  # fmt: skip
    obj = json.loads(js.out)
    assert js.code == 0 and obj["type"] == "tool_result" and obj["is_error"] is False
    assert "demo:src/kernels.py:" in obj["content"]


class _ScriptedAnthropic(BaseHTTPRequestHandler):
    """A stand-in for the Messages API: asks for one search, then answers."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.requests.append(body)
        if len(self.requests) == 1:
            content: list[dict[str, Any]] = [
                {"type": "tool_use", "id": "toolu_01", "name": "search",
                 "input": {"query": "ring of pipeline stages", "k": 2}},
            ]  # fmt: skip
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "See demo:src/kernels.py."}], "end_turn"
        reply = {
            "id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
            "model": "claude-test", "content": content, "stop_reason": stop,
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5},
        }  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_tool_use_round_trip_through_the_anthropic_sdk(toolset: ToolSet) -> None:
    _ScriptedAnthropic.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedAnthropic)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = anthropic.Anthropic(
            api_key="test", base_url=f"http://127.0.0.1:{server.server_port}", max_retries=0
        )
        messages: list[Any] = [{"role": "user", "content": "Where is the ring buffer?"}]
        tool_defs = anthropic_tools(toolset, cache_control=True)
        first = client.messages.create(
            model="claude-test",
            max_tokens=256,
            tools=tool_defs,
            messages=messages,
        )
        assert first.stop_reason == "tool_use"
        block = first.content[0]
        assert isinstance(block, ToolUseBlock)
        result = run_tool_use(toolset, block)
        assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01"
        assert result["is_error"] is False and "[1] demo:src/kernels.py:" in result["content"]
        messages += [
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [result]},
        ]
        final = client.messages.create(
            model="claude-test",
            max_tokens=256,
            tools=tool_defs,
            messages=messages,
        )
        assert final.stop_reason == "end_turn"
    finally:
        server.shutdown()
        server.server_close()
    sent_tools, second = _ScriptedAnthropic.requests[0]["tools"], _ScriptedAnthropic.requests[1]
    assert sent_tools == json.loads(json.dumps(tool_defs))
    assert second["messages"][2]["content"][0] == result


def test_toolset_without_a_workspace_opens_the_default_index(
    demo_defined: str, demo_index: DemoIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: ``ToolSet()``, the documented default, imported a module that does not
    exist on its first call. Made as a user makes it: no workspace, the index found from
    the environment."""
    monkeypatch.setenv("CTXKERNEL_INDEX_DIR", str(demo_index.index_dir))
    toolset = ToolSet()
    result = toolset.call("search", {"query": "stage copy a tile of the buffer", "k": 2})
    assert not result.is_error, result.text
    ids = [block[0] for block in _blocks(result.text)]
    assert len(ids) == 2 and ids[0].startswith("demo:src/examples/pipeline.py:")
    assert toolset.workspace.settings.index_dir == demo_index.index_dir
