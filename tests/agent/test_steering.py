"""Steering a run: the interactive console in a real terminal (tmux) against the scripted
Messages API on 127.0.0.1 (the real SDK, streaming), and without a terminal ``--resume
RUN --note`` and ``steer.md``; ``runs show`` lists the notes and when they arrived."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxkernel.agent import RunRecord
from ctxkernel.agent.prompt import ENGINEER_MARK
from ctxkernel.agent.runs import agent_runs_dir
from ctxkernel.agent.steer import Decision, Note, Steering, parse_line, read_paragraphs

from .conftest import EXAMPLES, ROOT, SECRET, files_containing, source
from .scripted import Reply, ScriptedAPI, last_user_text, tool_use
from .tmux import Tmux

VECTOR_ADD = EXAMPLES / "vector_add"
SYNTAX_ERROR = source("vector_add/bad/syntax_error.py")
NO_ENTRY = source("vector_add/bad/no_entry.py")


def _only_run() -> RunRecord:
    [path] = [p for p in agent_runs_dir().iterdir() if p.is_dir()]
    return RunRecord(path)


def _submit(k: int) -> Reply:
    """Version k: a module the pre-checks reject (fast: no worker), alternating two kinds."""
    src = (SYNTAX_ERROR if k % 2 else NO_ENTRY) + f"\n# version {k}\n"
    return Reply([tool_use("check_kernel", {"source": src, "notes": f"try {k}"}, f"toolu_v{k}")])


def _env(home: Path, url: str, tmp: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp / "home"),
        "TERM": "screen-256color",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "CTXKERNEL_HOME": str(home),
        "XDG_CACHE_HOME": str(tmp / "xdg-cache"),
        "TRITON_CACHE_DIR": str(tmp / "triton-cache"),
        "TRITON_DEFAULT_FP_FUSION": "1",
        "HF_HUB_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "ANTHROPIC_API_KEY": SECRET,
        "ANTHROPIC_BASE_URL": url,
    }
    (tmp / "home").mkdir(exist_ok=True)
    return env


def test_interactive_console_steers_the_run_in_a_real_terminal(
    isolated_home: Path, tmp_path: Path, run_cli: Any
) -> None:
    working = threading.Event()  # request 5 waits until the test typed a line meanwhile

    def policy(body: dict[str, Any], index: int) -> Reply:
        if index == 4:
            working.wait(60)
        return _submit(index + 1)

    term = Tmux(tmp_path / "tmux.sock")
    with ScriptedAPI(policy).serve() as api:
        argv = [sys.executable, "-m", "ctxkernel", "agent", str(VECTOR_ADD), "--interactive",
                "--device", "cpu", "--max-iters", "8", "--patience", "20", "--model", "claude-opus-4-5"]  # fmt: skip
        term.start(argv, _env(isolated_home, api.url, tmp_path), ROOT, tmp_path / "exit.log")
        try:
            _drive(term, api, working)
            status = term.exit_status()
        finally:
            print(term.screen())  # shown when the test fails
            term.close()
    assert status == "exit=1"  # no correct version

    record = _only_run()
    notes = record.notes()
    assert [(n["text"], n["source"]) for n in notes] == [
        ("use a mask: offs < n", "console"),
        ("typed while the model worked", "console"),
    ]
    assert [n["after_version"] for n in notes] == [1, 5]
    steers = [(e["action"], e.get("version")) for e in record.transcript() if e["type"] == "steer"]
    assert steers == [("pin", 1), ("back", 1), ("stop", None)]
    summary = record.summary()
    assert summary is not None and summary["stop_reason"] == "engineer" and summary["notes"] == 2
    shown = run_cli("runs", "show", record.id, "--no-transcript")
    assert "notes from the engineer:" in shown.out
    assert "after v1 (console): use a mask: offs < n" in shown.out
    assert "after v5 (console): typed while the model worked" in shown.out
    assert "pinned v1" in shown.out and "back to v1" in shown.out
    assert files_containing(isolated_home, SECRET) == []


def _drive(term: Tmux, api: ScriptedAPI, working: threading.Event) -> None:
    def requests(n: int) -> Any:
        return lambda _screen: len(api.requests) >= n

    # v1 is checked: the verdict line, then the prompt; a line of text is guidance
    screen = term.wait_for("v1 checked. Enter = go on", what="the first prompt")
    assert "v1  FAILED at pre-checks" in screen and "engineer> _" in screen
    assert "$0.0" in screen  # the cost so far, in the live region
    term.send("use a mask: offs < n")
    term.wait_for(requests(2), what="the second request")
    said = last_user_text(api.requests[1])
    assert f"{ENGINEER_MARK} use a mask: offs < n" in said
    assert "version 1: FAILED at pre-checks" in said  # the verdict comes before the note

    # v2: look at it, diff it, the budget, pin v1 as the base; Enter goes on
    term.wait_for("v2 checked. Enter", what="the second prompt")
    term.send("/show 2")
    screen = term.wait_for("--- v2 feedback (what the model read)", what="/show 2")
    assert "def kernel(inputs):" in screen and "# version 2" in screen
    term.send("/diff 2 1")
    screen = term.wait_for("+# version 2", what="/diff 2 1")
    assert "--- v1\n+++ v2\n" in screen and "-# version 1" in screen
    term.send("/budget")
    term.wait_for("rounds: 2 of 8 (6 left)", what="/budget")
    term.send("/pin 1")
    term.wait_for("pinned v1: the next versions build on it", what="/pin 1")
    term.send("")
    term.wait_for(requests(3), what="the third request")
    said = last_user_text(api.requests[2])
    assert "Keep version 1 as the base" in said and "# version 1" in said

    # v3: the policy note now builds on the pinned v1; go back to v1's conversation
    term.wait_for("v3 checked. Enter", what="the third prompt")
    term.send("/back 1")
    term.wait_for("the model continues from v1's conversation", what="/back 1")
    term.send("")
    term.wait_for(requests(4), what="the fourth request")
    messages = api.requests[3]["messages"]
    assert len(messages) == 3  # task, v1's submission, v1's verdict (+ the back note)
    assert messages[1]["content"][0]["id"] == "toolu_v1"
    assert "We are back at version 1" in last_user_text(api.requests[3])
    assert all("toolu_v2" not in json.dumps(m) for m in messages)

    # v4: go on; while the model works on v5, a line is typed: read after that round
    term.wait_for("v4 checked. Enter", what="the fourth prompt")
    term.send("")
    term.wait_for(requests(5), what="the fifth request")
    assert "Base: version 1, pinned by the engineer; build on it:" in last_user_text(
        api.requests[4]
    )
    term.send("typed while the model worked")
    term.wait_for("1 line(s) typed: read after this round", what="the queued line")
    working.set()
    term.wait_for(requests(6), what="the sixth request (no wait: the line was typed)")
    said = last_user_text(api.requests[5])
    assert f"{ENGINEER_MARK} typed while the model worked" in said
    assert "Base: version 1, pinned by the engineer; build on it:" in said

    # v6: stop
    term.wait_for("v6 checked. Enter", what="the sixth prompt")
    term.send("/stop")
    screen = term.wait_for("stop: engineer -- stopped by the engineer (/stop)", what="the stop")
    assert "best: none correct" in screen
    assert len(api.requests) == 6


def test_interactive_without_a_terminal_is_one_clear_error(run_cli: Any) -> None:
    res = run_cli("agent", VECTOR_ADD, "--interactive", "--device", "cpu")
    assert res.code == 2
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "--interactive needs a terminal" in lines[0]
    assert "Traceback" not in res.err
    assert not agent_runs_dir().exists()


def test_resume_note_and_steer_md_reach_the_model(
    run_cli: Any, api_env: None, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    appended = threading.Event()

    def policy(body: dict[str, Any], index: int) -> Reply:
        said = last_user_text(body)
        if f"{ENGINEER_MARK} the epilogue is the problem" in said and not appended.is_set():
            # while the resumed run is going, the engineer appends two notes to steer.md
            steer = _only_run().path / "steer.md"
            with open(steer, "a") as fh:
                fh.write("\nstop tuning the MMA:\nthis kernel is memory-bound\n\nuse wider loads\n")
            appended.set()
        return _submit(index + 1)

    with ScriptedAPI(policy).serve() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        first = run_cli("agent", VECTOR_ADD, "--device", "cpu", "--max-iters", "1")
        assert first.code == 1 and "stop: max-iters" in first.out, first.err
        record = _only_run()
        assert (record.path / "steer.md").read_text().startswith("<!--")
        again = run_cli("agent", "--resume", "last", "--note", "the epilogue is the problem",
                        "--max-iters", "3", "--json")  # fmt: skip
    assert again.code == 1, again.err
    # the note is the first user turn of the resumed session, after v1's verdict
    resumed = last_user_text(api.requests[1])
    assert resumed.index("version 1: FAILED") < resumed.index(
        f"{ENGINEER_MARK} the epilogue is the problem"
    )
    # steer.md's paragraphs, read between rounds, reach the next request, one note each
    nxt = last_user_text(api.requests[2])
    assert f"{ENGINEER_MARK} stop tuning the MMA: this kernel is memory-bound" in nxt
    assert f"{ENGINEER_MARK} use wider loads" in nxt
    assert len(api.requests) == 3
    events = [json.loads(line) for line in again.out.splitlines()]
    assert [e["source"] for e in events if e["type"] == "note"] == [
        "--note",
        "steer.md",
        "steer.md",
    ]
    notes = record.notes()
    assert [n["text"] for n in notes] == [
        "the epilogue is the problem",
        "stop tuning the MMA: this kernel is memory-bound",
        "use wider loads",
    ]
    assert all(n["arrived"].startswith("20") for n in notes)
    shown = run_cli("runs", "show", "last", "--no-transcript")
    assert "after v1 (--note): the epilogue is the problem" in shown.out
    assert "after v2 (steer.md): use wider loads" in shown.out
    as_json = [
        json.loads(line) for line in run_cli("runs", "show", "last", "--json").out.splitlines()
    ]
    assert sum(1 for e in as_json if e["type"] == "note") == 3
    plotted = run_cli("runs", "plot", "last")
    assert plotted.code == 0 and Path(plotted.out.strip()).read_bytes().startswith(b"\x89PNG")


def test_a_note_keeps_a_finished_run_going(api_env: None, isolated_home: Path) -> None:
    """A run that stopped on its target goes on when resumed with a note."""
    from ctxkernel.agent import Agent, AgentConfig
    from ctxkernel.tools import ToolSet

    toolset = ToolSet()

    from .conftest import make_client
    from .test_agent_units import fake_gpu, submit_next

    with ScriptedAPI(submit_next()).serve() as api:
        cfg = AgentConfig(problem=str(VECTOR_ADD), device="cpu", target=0.5)
        evaluator = fake_gpu([(30.0, 0.6), (20.0, 0.7)])
        done = Agent.start(cfg, make_client(api.url), toolset=toolset, evaluator=evaluator).run()
        assert done.summary["stop_reason"] == "target" and len(api.requests) == 1
        again = Agent.resume(
            done.record.id, {"max_iters": 2}, lambda c: make_client(api.url), toolset=toolset,
            evaluator=evaluator, steering=Steering(["make it faster anyway"]),
        ).run()  # fmt: skip
    assert len(api.requests) == 2
    assert f"{ENGINEER_MARK} make it faster anyway" in last_user_text(api.requests[1])
    assert again.summary["stop_reason"] == "target" and again.best is not None
    assert again.best["version"] == 2  # the new best reaches the target again: a new stop


def test_typed_lines_and_steer_md_paragraphs(tmp_path: Path) -> None:
    assert parse_line("").kind == "go" and parse_line("  ").kind == "go"
    assert parse_line("use TMA multicast").text == "use TMA multicast"
    assert parse_line("//pin is a word").text == "/pin is a word"
    assert (parse_line("/diff v3 1").kind, parse_line("/diff v3 1").args) == ("diff", (3, 1))
    assert parse_line("/pin off").kind == "unpin"
    assert parse_line("/back").text == "usage: /back N"
    assert parse_line("/frobnicate").text == "unknown command /frobnicate (/help lists them)"
    assert parse_line("/show x").kind == "error"

    pin, unpin = Decision(pin=3), Decision(unpin=True)
    assert pin.merge(unpin).pin is None and pin.merge(unpin).unpin
    assert unpin.merge(pin).pin == 3 and not unpin.merge(pin).unpin
    assert Decision(notes=[Note("a", "console")]).merge(Decision(stop=True)).stop

    steer = tmp_path / "steer.md"
    steer.write_text("<!-- a comment\n   over lines -->\nfirst note\ngoes on\n\nsecond")
    notes, offset = read_paragraphs(steer, 0)
    assert notes == ["first note goes on"]  # "second" has no newline yet: not read
    with open(steer, "a") as fh:
        fh.write(" note\n")
    notes, offset = read_paragraphs(steer, offset)
    assert notes == ["second note"]
    assert read_paragraphs(steer, offset) == ([], offset)


def test_runs_plot_marks_where_guidance_arrived(tmp_path: Path) -> None:
    from ctxkernel.agent.plot import plot_run

    versions = [{"version": 1, "ok": False, "level": 3}, {"version": 2, "ok": True, "level": 5},
                {"version": 3, "ok": False, "overfit": True, "level": 5}]  # fmt: skip
    plain = plot_run(versions, tmp_path / "plain.png").read_bytes()
    marked = plot_run(versions, tmp_path / "marked.png", notes=[1, 2]).read_bytes()
    assert marked.startswith(b"\x89PNG") and marked != plain
