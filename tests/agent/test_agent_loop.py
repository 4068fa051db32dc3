"""The agent loop end to end, on the CPU path, with the real anthropic SDK against a
scripted Messages API: the loop searches the demo index, submits a wrong kernel, reads
the harness's feedback, submits the honest one and stops at the target; retries on 429
and 529; budget stops; resume; parallel samples; the API failing for good; the key never
written anywhere; ``runs``, ``runs show``, ``runs plot``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from retrieval.conftest import CliResult

from ctxkernel.agent import Agent, AgentConfig, RunRecord, evaluate
from ctxkernel.agent.runs import agent_runs_dir

from .conftest import EXAMPLES, SECRET, files_containing, make_client, source
from .scripted import Error, Reply, ScriptedAPI, last_user_text, text, tool_results, tool_use

VECTOR_ADD = EXAMPLES / "vector_add"
OFF_BY_ONE = source("vector_add/bad/off_by_one.py")
SYNTAX_ERROR = source("vector_add/bad/syntax_error.py")
HONEST = source("vector_add/solution_triton.py")


def _result_ids(body: dict[str, Any]) -> set[str]:
    return {r["tool_use_id"] for r in tool_results(body)}


def session_policy(first: str, errors: bool = True) -> Any:
    """Search, submit ``first``, then the honest kernel once the feedback says v1 failed."""

    def policy(body: dict[str, Any], index: int) -> Reply | Error:
        if errors and index == 0:
            return Error(
                429, "rate_limit_error", "Number of request tokens has exceeded your rate limit"
            )
        if errors and index == 1:
            return Error(529, "overloaded_error", "Overloaded")
        said = last_user_text(body)
        if len(body["messages"]) == 1:
            return Reply([text("Let me look at how the demo kernels are written."),
                          tool_use("search", {"query": "ring of pipeline stages", "k": 2}, "toolu_search")],
                         cache_write=3000)  # fmt: skip
        if "toolu_search" in _result_ids(body):
            return Reply([text("A first version."),
                          tool_use("check_kernel", {"source": first, "notes": "first version"}, "toolu_v1")],
                         cache_read=3000)  # fmt: skip
        if "version 1: FAILED" in said:
            return Reply([text("Fixing what the harness reported."),
                          tool_use("check_kernel", {"source": HONEST, "notes": "mask offs < n"}, "toolu_v2")],
                         cache_read=3500)  # fmt: skip
        return Reply([text("Done.")], stop_reason="end_turn")

    return policy


def _only_run() -> RunRecord:
    [path] = [p for p in agent_runs_dir().iterdir() if p.is_dir()]
    return RunRecord(path)


def _assert_no_key(*roots: Path, outputs: tuple[str, ...] = ()) -> None:
    for root in roots:
        assert files_containing(root, SECRET) == []
    for out in outputs:
        assert SECRET not in out


def test_cli_session_searches_fails_fixes_and_stops_at_the_target(
    run_cli: Any,
    demo_defined: str,
    demo_index: Any,
    api_env: None,
    isolated_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with ScriptedAPI(session_policy(OFF_BY_ONE)).serve() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)  # honoured as the SDK does
        res: CliResult = run_cli("agent", VECTOR_ADD, "--model", "claude-opus-4-8", "--max-iters", "5",
                                 "--price", "5,25", "--device", "cpu",
                                 "--index-dir", demo_index.index_dir, "-v")  # fmt: skip
    assert res.code == 0, res.err
    out = res.out.splitlines()
    assert (
        out[0].startswith("run ")
        and "(vector_add, triton, claude-opus-4-8, cpu (Triton interpreter))" in out[0]
    )
    assert any(line.startswith("v1") and "FAILED at correctness" in line for line in out)
    assert any(
        line.startswith("v2") and "PASSED" in line and "mask offs < n" in line for line in out
    )
    assert any(
        line.startswith("stop: target -- version 2 is correct; the harness gives no timing")
        for line in out
    )
    assert any(line.startswith("best: v2 -> ") for line in out)
    assert "retry 1: HTTP 429 rate_limit_error" in res.err
    assert "retry 2: HTTP 529 overloaded_error: Overloaded" in res.err
    assert "  search {" in res.err  # progress on stderr with -v

    # what the API saw: the key (from the environment), streaming, caching, the prompt
    assert len(api.requests) == 5 and set(api.credentials) == {SECRET}
    first = api.requests[2]
    assert first["stream"] is True and first["model"] == "claude-opus-4-8"
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [t["name"] for t in first["tools"]] == [
        "search",
        "grep",
        "docs",
        "read",
        "list_corpora",
        "related",
        "check_kernel",
    ]
    system = first["system"][0]["text"]
    for needed in ("ref_kernel", "return x + y", "n=4097", "FLOP", "Forbidden", "add, aten::add",
                   "Done means: a correct version", "tl.arange", "check_kernel"):  # fmt: skip
        assert needed in system, needed
    second = api.requests[3]
    assert second["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "demo:src/" in last_user_text(second)  # the loop searched the index
    third = last_user_text(api.requests[4])
    assert "version 1: FAILED at correctness" in third
    assert "worst mismatches" in third and "Next for version 1: fix correctness" in third
    assert "Round 1 of 5." in third

    # the records
    record = _only_run()
    assert record.source(1) == OFF_BY_ONE and record.source(2) == HONEST
    assert (record.path / "best.py").read_text() == HONEST
    verdict = json.loads((record.version_dir(2) / "verdict.json").read_text())
    assert verdict["ok"] is True and verdict["device"] == "cpu"
    summary = record.summary()
    assert summary is not None
    assert summary["stop_reason"] == "target" and summary["best"]["version"] == 2
    assert summary["usage"] == {"input_tokens": 3600, "output_tokens": 900,
                                "cache_read_tokens": 6500, "cache_write_tokens": 3000}  # fmt: skip
    expected = (3600 * 5 + 900 * 25 + 3000 * 6.25 + 6500 * 0.5) / 1e6
    assert summary["cost_usd"] == pytest.approx(expected)
    assert summary["price_source"] == "option"
    assert summary["retries"] == 2 and summary["calls"] == 3
    kinds = {e["type"] for e in record.transcript()}
    assert {"start", "system", "request", "assistant", "tool", "retry", "version", "stop"} <= kinds

    # runs, runs show, runs plot
    listed = run_cli("runs")
    assert listed.code == 0 and record.id in listed.out and "target" in listed.out
    assert "v2" in listed.out and "1/2" in listed.out
    as_json = [json.loads(line) for line in run_cli("runs", "--json").out.splitlines()]
    assert as_json[0]["type"] == "run" and as_json[0]["id"] == record.id
    shown = run_cli("runs", "show", "last")
    assert shown.code == 0
    assert "FAILED correctness" in shown.out and "PASSED" in shown.out and "2*" in shown.out
    assert "claude -> search" in shown.out and "claude -> check_kernel" in shown.out
    assert "== version 1: FAILED at correctness" in shown.out
    plotted = run_cli("runs", "plot", record.id[:15], "-o", tmp_path / "p.png")
    assert plotted.code == 0
    png = Path(plotted.out.strip()).read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000

    _assert_no_key(isolated_home, tmp_path, outputs=(res.out, res.err, shown.out))


def test_resume_continues_a_run_after_a_budget_stop(
    run_cli: Any, demo_defined: str, demo_index: Any, api_env: None,
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    with ScriptedAPI(session_policy(SYNTAX_ERROR, errors=False)).serve() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        args = ("--device", "cpu", "--index-dir", demo_index.index_dir)
        first = run_cli("agent", VECTOR_ADD, "--max-iters", "1", *args)
        assert first.code == 1, first.err  # stopped, nothing correct yet
        assert "v1   round 1   FAILED at pre-checks" in first.out
        assert "stop: max-iters" in first.out
        record = _only_run()
        assert record.summary()["stop_reason"] == "max-iters"  # type: ignore[index]
        assert len(api.requests) == 2

        again = run_cli(
            "agent", "--resume", "last", "--max-iters", "3", "--index-dir", demo_index.index_dir
        )
    assert again.code == 0, again.err
    assert again.out.startswith(f"resuming {record.id}")
    assert "v2   round 2   PASSED" in again.out and "stop: target" in again.out
    resumed = api.requests[2]["messages"]
    assert [m["role"] for m in resumed] == ["user", "assistant", "user", "assistant", "user"]
    assert "version 1: FAILED at pre-checks" in last_user_text(api.requests[2])
    summary = record.summary()
    assert summary is not None
    assert [v["version"] for v in record.versions()] == [1, 2]
    assert summary["rounds"] == 2 and summary["calls"] == 3 and summary["stop_reason"] == "target"
    assert record.config["config"]["max_iters"] == 3
    assert [e["type"] for e in record.transcript()].count("resume") == 1
    _assert_no_key(isolated_home, outputs=(first.out, first.err, again.out, again.err))


@pytest.mark.parametrize(
    ("option", "value", "reason", "calls"),
    [("max_cost", 1e-6, "max-cost", 1), ("token_budget", 100, "max-tokens", 1),
     ("max_wall_s", 0.0, "max-wall", 0)],
)  # fmt: skip
def test_budget_stops_keep_the_partial_run(
    option: str, value: float, reason: str, calls: int, toolset: Any, api_env: None,
    isolated_home: Path,
) -> None:  # fmt: skip
    with ScriptedAPI(session_policy(HONEST, errors=False)).serve() as api:
        config = AgentConfig(problem=str(VECTOR_ADD), device="cpu", **{option: value})
        agent = Agent.start(config, make_client(api.url), toolset=toolset)
        result = agent.run()
    summary = result.summary
    assert summary["stop_reason"] == reason and summary["calls"] == calls
    assert summary["versions"] == 0 and summary["best"] is None
    state = result.record.load_state()
    assert state is not None and state["status"] == "stopped" and state["messages"]
    assert len(api.requests) == calls
    _assert_no_key(isolated_home)


def test_samples_are_checked_together_and_the_best_continues(
    toolset: Any, api_env: None, isolated_home: Path
) -> None:
    def policy(body: dict[str, Any], index: int) -> Reply:
        said = last_user_text(body)
        kernel = OFF_BY_ONE if "Sample 1 of 2" in said else HONEST
        ident = "toolu_a" if kernel is OFF_BY_ONE else "toolu_b"
        return Reply([tool_use("check_kernel", {"source": kernel}, ident)])

    batches: list[tuple[int, str, bool]] = []

    def evaluator(problem: Any, candidates: list[Path], options: Any, **kw: Any) -> Any:
        batches.append((len(candidates), kw["runner"].spec, options.shapes is not None))
        return evaluate(problem, candidates, options, **kw)

    with ScriptedAPI(policy).serve() as api:
        config = AgentConfig(problem=str(VECTOR_ADD), device="cpu", samples=2)
        result = Agent.start(
            config, make_client(api.url), toolset=toolset, evaluator=evaluator
        ).run()
    # both samples of the round, checked by the slot pool; then the best alone, on unseen shapes
    assert batches == [(2, "pool", False), (1, "pool", True)]
    metas = {v["sample"]: v for v in result.record.versions()}
    assert not metas[0]["ok"] and metas[0]["failed_rung"] == "correctness"
    assert metas[1]["ok"]
    assert result.summary["stop_reason"] == "target"
    assert result.best is not None and result.best["version"] == metas[1]["version"]
    state = result.record.load_state()
    assert state is not None
    assert state["messages"][-2]["content"][0]["id"] == "toolu_b"  # the best sample continues
    note = state["messages"][-1]["content"][-1]["text"]
    assert f"Other sample: version {metas[0]['version']}: FAILED at correctness" in note
    _assert_no_key(isolated_home)


def test_api_failing_for_good_is_a_clean_stop(
    run_cli: Any, api_env: None, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedAPI(lambda body, i: Error(529, "overloaded_error", "Overloaded")).serve() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        res = run_cli("agent", VECTOR_ADD, "--device", "cpu", "--max-retries", "2")
    assert res.code == 2
    assert "stop: api-error -- HTTP 529 overloaded_error: Overloaded (after 2 attempts)" in res.out
    assert "ctxkernel: error: the API failed" in res.err and "--resume" in res.err
    assert len(api.requests) == 2
    record = _only_run()
    summary = record.summary()
    assert summary is not None and summary["stop_reason"] == "api-error"
    assert record.load_state() is not None  # resumable
    _assert_no_key(isolated_home, outputs=(res.out, res.err))


def test_a_missing_key_is_a_usage_error(run_cli: Any, isolated_home: Path) -> None:
    res = run_cli("agent", VECTOR_ADD, "--device", "cpu")
    assert res.code == 2
    assert "ANTHROPIC_API_KEY" in res.err
    assert not agent_runs_dir().exists()
