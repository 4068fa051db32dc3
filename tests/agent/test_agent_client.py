"""The model client against servers that do not stream, and the key's lifetime.

An API-compatible server may answer a streamed request (``stream: true``) with a plain
``application/json`` message: the SDK's stream then ends in an ``AssertionError``. The
client reads the message instead, or fails with one line naming the cause. Once the SDK
has read ``ANTHROPIC_API_KEY``, the process's environment -- ``/proc/self/environ``
included, which a candidate's worker could otherwise read from its parent -- holds it no
more, while requests still carry it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ctxkernel.agent.runs import agent_runs_dir

from .conftest import EXAMPLES, ROOT, SECRET, files_containing, make_client
from .scripted import Reply, ScriptedAPI, text, tool_use

VECTOR_ADD = EXAMPLES / "vector_add"


def _ends_at_once(body: dict[str, Any], index: int) -> Reply:
    return Reply([text("Nothing to add.")], stop_reason="end_turn")


def test_a_streamed_request_answered_with_json_is_read_as_the_message(api_env: None) -> None:
    def policy(body: dict[str, Any], index: int) -> Reply:
        return Reply([text("Looking."), tool_use("search", {"query": "tiled copy"}, "toolu_1")],
                     input_tokens=321, output_tokens=45)  # fmt: skip

    with ScriptedAPI(policy, stream_as="json").serve() as api:
        reply = make_client(api.url).create(
            system="sys", messages=[{"role": "user", "content": "hi"}]
        )
    assert api.requests[0]["stream"] is True  # the client asked for a stream
    assert reply.text() == "Looking."
    assert reply.tool_uses() == [
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "tiled copy"}}
    ]
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (321, 45)
    assert reply.stop_reason == "tool_use" and reply.attempts == 1


def test_agent_against_a_server_that_answers_streams_with_json(
    run_cli: Any, api_env: None, isolated_home: Path, monkeypatch: Any
) -> None:
    with ScriptedAPI(_ends_at_once, stream_as="json").serve() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        res = run_cli("agent", VECTOR_ADD, "--device", "cpu", "--max-iters", "1")
    assert "Traceback" not in res.err and "AssertionError" not in res.err
    assert res.code == 1, res.out + res.err  # the run ended normally with no correct version
    assert "stop:" in res.out and api.requests
    assert files_containing(isolated_home, SECRET) == []


def test_a_streamed_request_answered_with_something_else_fails_in_one_line(
    run_cli: Any, api_env: None, isolated_home: Path, monkeypatch: Any
) -> None:
    body = json.dumps({"object": "chat.completion", "choices": []}).encode()
    with ScriptedAPI(_ends_at_once, stream_as=body).serve() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        res = run_cli("agent", VECTOR_ADD, "--device", "cpu", "--max-retries", "2")
    assert res.code == 2
    assert "Traceback" not in res.err
    [line] = [x for x in res.err.splitlines() if x.startswith("ctxkernel: error:")]
    assert "the API answered a streamed request with application/json that is not a message" in line
    assert len(api.requests) == 1  # not retried: another try gets the same answer
    assert [p.name for p in agent_runs_dir().iterdir()]  # the run is kept, resumable


def test_the_key_leaves_the_environment_once_the_sdk_has_it(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from ctxkernel.agent import ModelClient, ModelSettings, RetryPolicy\n"
        "client = ModelClient(ModelSettings(max_tokens=64), base_url=sys.argv[1],\n"
        "                     retry=RetryPolicy(max_attempts=1))\n"
        "client.check_credentials()\n"
        "environ = open('/proc/self/environ', 'rb').read()\n"
        "reply = client.create(system='s', messages=[{'role': 'user', 'content': 'hi'}])\n"
        "import os\n"
        "print(sys.argv[2].encode() in environ, 'ANTHROPIC_API_KEY' in os.environ, reply.text())\n"
    )
    with ScriptedAPI(lambda body, i: Reply([text("ok")], stop_reason="end_turn")).serve() as api:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update(ANTHROPIC_API_KEY=SECRET, PYTHONPATH=str(ROOT))
        done = subprocess.run(
            [sys.executable, "-c", code, api.url, SECRET],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False", "ok"]
    assert api.credentials == [SECRET]  # the SDK still sends it


def test_a_candidate_reading_the_agents_proc_entries_finds_no_key(
    isolated_home: Path, tmp_path: Path
) -> None:
    """``ctxkernel agent`` holds the key in its environment when it starts; the planted
    candidate that reads its parent's environ, cmdline and fds (here in the weakest
    sandbox mode) finds nothing, and the key is in no request, record or output."""
    cheat = (ROOT / "tests" / "harness" / "cheats" / "c15_proc_parent.py").read_text()

    def policy(body: dict[str, Any], index: int) -> Reply:
        if index == 0:
            return Reply([tool_use("check_kernel", {"source": cheat, "notes": "look"}, "toolu_1")])
        return Reply([text("Done.")], stop_reason="end_turn")

    with ScriptedAPI(policy).serve() as api:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CTXKERNEL_"))
        }
        env.update(ANTHROPIC_API_KEY=SECRET, ANTHROPIC_BASE_URL=api.url, PYTHONPATH=str(ROOT),
                   CTXKERNEL_HOME=str(isolated_home), CTXKERNEL_ISOLATION="none",
                   MY_SERVICE_TOKEN="tok-planted-service-token-42")  # fmt: skip
        cmd = [sys.executable, "-m", "ctxkernel", "agent", str(VECTOR_ADD)]
        cmd += ["--device", "cpu", "--max-iters", "1", "--seeds", "1"]
        done = subprocess.run(
            cmd,
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output  # version 1 passed: the cheat found no secret
    assert "v1" in done.stdout and "PASSED" in done.stdout, output
    assert SECRET not in output and SECRET not in json.dumps(api.requests)
    assert files_containing(isolated_home, SECRET) == []
    assert files_containing(tmp_path, SECRET) == []
    assert api.credentials[0] == SECRET
