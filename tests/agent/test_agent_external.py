"""External agents: ``ctxkernel mcp --problem`` serves check_kernel beside the retrieval
tools (driven here by the official MCP client over stdio), and ``ctxkernel context init``
writes a working directory (instructions + .mcp.json) for Claude Code."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from ctxkernel.agent.runs import agent_runs_dir
from ctxkernel.tools import builtin_tools

from .conftest import EXAMPLES, ROOT, source


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_mcp_serves_check_kernel_over_stdio(isolated_home: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXKERNEL_", "ANTHROPIC_"))}
    env.update(CTXKERNEL_HOME=str(isolated_home), TRITON_DEFAULT_FP_FUSION="1",
               TRITON_CACHE_DIR=str(tmp_path / "triton"))  # fmt: skip
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "ctxkernel",
            "mcp",
            "--no-warm",
            "--device",
            "cpu",
            "--backend",
            "triton",
            "--problem",
            str(EXAMPLES / "vector_add"),
        ],
        env=env,
        cwd=str(ROOT),
    )
    errlog = (tmp_path / "server.err").open("w")

    async def main() -> None:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert list(listed) == [*(t.name for t in builtin_tools()), "check_kernel"]
            assert listed["check_kernel"].input_schema["required"] == ["source"]

            bad = await session.call_tool("check_kernel", {"notes": "no source"})
            assert bad.is_error and "'source' is a required property" in _text(bad)

            ok = await session.call_tool(
                "check_kernel",
                {"source": source("vector_add/solution_triton.py"), "notes": "honest"},
            )
            text = _text(ok)
            assert not ok.is_error, text
            assert text.splitlines()[0] == "version 1: PASSED"
            assert "[correctness] ok" in text and "timing: none on this device (cpu)" in text

    anyio.run(main)
    errlog.close()
    assert "Traceback" not in (tmp_path / "server.err").read_text()
    [run] = list(agent_runs_dir().iterdir())  # the external session is a run too
    meta = json.loads((run / "versions" / "1" / "meta.json").read_text())
    assert meta["ok"] is True and meta["notes"] == "honest"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["kind"] == "mcp" and summary["best"]["version"] == 1
    assert (run / "best.py").read_text() == source("vector_add/solution_triton.py")


def test_context_init_writes_a_directory_for_claude_code(run_cli: Any, tmp_path: Path) -> None:
    target = tmp_path / "softmax-agent"
    res = run_cli("context", "init", target, "--problem", EXAMPLES / "softmax", "--device", "cpu")
    assert res.code == 0, res.err
    assert res.out.split() == [str(target / n) for n in ("CLAUDE.md", "AGENTS.md", ".mcp.json")]
    instructions = (target / "CLAUDE.md").read_text()
    assert instructions == (target / "AGENTS.md").read_text()
    for needed in ("# Kernel task: softmax in triton", "check_kernel", "torch.softmax(x, dim=-1)",
                   "Forbidden", "aten::exp", "Done means: a correct version", "list_corpora",
                   "## The loop", str((EXAMPLES / "softmax").resolve())):  # fmt: skip
        assert needed in instructions, needed
    server = json.loads((target / ".mcp.json").read_text())["mcpServers"]["ctxkernel"]
    args = server["args"]
    assert args[args.index("mcp") + 1 :][:4] == [
        "--problem",
        str((EXAMPLES / "softmax").resolve()),
        "--backend",
        "triton",
    ]
    assert Path(server["command"]).name in ("ctxkernel", Path(sys.executable).name)
    assert server["env"]["CTXKERNEL_HOME"] == os.environ["CTXKERNEL_HOME"]

    again = run_cli("context", "init", target, "--problem", EXAMPLES / "softmax")
    assert again.code == 2 and "use --force" in again.err
    forced = run_cli("context", "init", target, "--problem", EXAMPLES / "softmax", "--force")
    assert forced.code == 0
