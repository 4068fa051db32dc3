"""The loop's parts without a real harness check: the optimisation phase against a
simulated GPU harness (benchmark and roofline rungs), the roofline target, the
no-improvement stop, trimming old turns, prompt caching marks, metrics read from a
verdict, prices and costs, thinking options, the progress plot."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from ctxkernel.agent import Agent, AgentConfig, Outcome
from ctxkernel.agent.check_tool import CheckOutcome, render_feedback, verdict_metrics
from ctxkernel.agent.client import ModelSettings, Price, Usage, price_for, thinking_param
from ctxkernel.agent.context import request_messages, trim
from ctxkernel.agent.plot import plot_run
from ctxkernel.tools import ToolSet

from .conftest import EXAMPLES, SECRET, files_containing, make_client
from .scripted import Reply, ScriptedAPI, last_user_text, tool_use

PAD = "# " + "x" * 200 + "\n"


def gpu_doc(time_us: float, roofline: float) -> dict[str, Any]:
    """A passing verdict as the harness reports it on a GPU (the performance rungs)."""
    ok = {"ok": True, "status": "ok", "gating": True, "reason": "", "details": {}}
    rungs = [
        {**ok, "name": "pre-checks", "metrics": {}},
        {**ok, "name": "compile", "metrics": {"first_call_s": 0.9}},
        {**ok, "name": "run", "metrics": {"elapsed_s": 0.02}},
        {**ok, "name": "correctness", "metrics": {"max_abs": 0.0}},
        {**ok, "name": "anti-cheat", "metrics": {}},
        {**ok, "name": "benchmark", "metrics": {"median_us": time_us, "speedup": 1.5}},
        {
            **ok,
            "name": "roofline",
            "metrics": {"pct_of_roofline": 100 * roofline, "bound": "memory"},
        },
    ]
    summary = {"shape": "n=1", "time_ms": time_us / 1e3, "speedup": 1.5,
               "pct_of_roofline": 100 * roofline, "bound": "memory"}  # fmt: skip
    return {
        "type": "verdict",
        "ok": True,
        "failed_rung": None,
        "reason": "",
        "device": "cuda",
        "rungs": rungs,
        "summary": summary,
    }


def fake_gpu(results: list[tuple[float, float]]) -> Any:
    """An evaluator that answers version k (from the source's first line) with results[k-1]."""

    def evaluator(
        problem: Any, candidates: list[Path], options: Any, **kw: Any
    ) -> list[CheckOutcome]:
        out = []
        for path in candidates:
            k = int(path.read_text().split()[2])
            doc = gpu_doc(*results[k - 1])
            out.append(CheckOutcome(Outcome.from_verdict(doc), "PASSED all rungs (gpu).", doc, 0.1))
        return out

    return evaluator


def submit_next(pad_lines: int = 0) -> Any:
    def policy(body: dict[str, Any], index: int) -> Reply:
        k = 1 + sum(1 for m in body["messages"] if m["role"] == "assistant")
        src = f"# version {k}\n" + PAD * pad_lines + "def custom_kernel(inputs):\n    ...\n"
        return Reply([tool_use("check_kernel", {"source": src, "notes": f"try {k}"}, f"toolu_{k}")])

    return policy


def test_optimisation_stops_at_the_roofline_target(api_env: None, isolated_home: Path) -> None:
    with ScriptedAPI(submit_next()).serve() as api:
        cfg = AgentConfig(problem=str(EXAMPLES / "vector_add"), device="cpu", target=0.8)
        agent = Agent.start(cfg, make_client(api.url), toolset=ToolSet(),
                            evaluator=fake_gpu([(30.0, 0.5), (20.0, 0.7), (15.0, 0.85)]))  # fmt: skip
        result = agent.run()
    summary = result.summary
    assert summary["stop_reason"] == "target"
    assert summary["stop_detail"] == "version 3 reaches 85% of the roofline (target 80%)"
    assert summary["best"]["version"] == 3 and summary["best"]["time_us"] == 15.0
    note = last_user_text(api.requests[1])
    assert "version 1: PASSED  30 us, 50% of roofline (memory), 1.50x the reference" in note
    assert "Best so far: version 1 (30 us, 50% of roofline (memory), 1.50x the reference)." in note
    assert "Next: make it faster: 50% of the roofline, target 80%." in note
    out = plot_run(result.record.versions(), result.record.path / "p.png", target=0.8)
    assert out.read_bytes().startswith(b"\x89PNG")


def test_no_improvement_stop_trims_old_turns_and_reseeds_the_best(
    api_env: None, isolated_home: Path
) -> None:
    results = [(30.0, 0.5), (40.0, 0.4), (35.0, 0.45), (38.0, 0.42)]
    with ScriptedAPI(submit_next(pad_lines=150)).serve() as api:
        cfg = AgentConfig(problem=str(EXAMPLES / "vector_add"), device="cpu", patience=3,
                          context_tokens=4000)  # fmt: skip
        result = Agent.start(
            cfg, make_client(api.url), toolset=ToolSet(), evaluator=fake_gpu(results)
        ).run()
    assert result.summary["stop_reason"] == "no-improvement"
    assert result.summary["versions"] == 4 and result.summary["best"]["version"] == 1
    # version 2 was slower: the note says so and hands back the best version's source
    note = last_user_text(api.requests[2])
    assert "Your latest version is not the best; version 1 was:" in note and "# version 1" in note
    assert "1 round(s) without improvement (stop at 3)" in note
    # by the fourth request the oldest turns are trimmed; the newest are whole
    messages = api.requests[3]["messages"]
    old_source = messages[1]["content"][0]["input"]["source"]
    assert old_source == "# [trimmed: source kept as version 1 (versions/1/candidate.py)]"
    assert messages[2]["content"][0]["content"].startswith("version 1: PASSED")  # short: kept
    assert messages[-2]["content"][0]["input"]["source"].startswith("# version 3")
    assert messages[0]["content"].startswith("Write the first triton version")  # the task: whole
    trims = [e for e in result.record.transcript() if e["type"] == "trim"]
    assert trims and trims[0]["tokens_after"] < trims[0]["tokens_before"]
    assert files_containing(isolated_home, SECRET) == []


def test_request_messages_marks_only_the_last_block() -> None:
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": [tool_use("search", {"query": "q"}, "t1")]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"},
                                     {"type": "text", "text": "note"}]},
    ]  # fmt: skip
    before = copy.deepcopy(messages)
    out = request_messages(messages)
    assert messages == before  # the stored conversation stays clean
    marks = [
        b
        for m in out
        if isinstance(m["content"], list)
        for b in m["content"]
        if "cache_control" in b
    ]
    assert marks == [{"type": "text", "text": "note", "cache_control": {"type": "ephemeral"}}]
    only = request_messages([{"role": "user", "content": "task"}])
    assert only[0]["content"] == [
        {"type": "text", "text": "task", "cache_control": {"type": "ephemeral"}}
    ]


def test_trim_keeps_ids_the_task_and_the_recent_turns() -> None:
    hits = "\n".join(f"[{i}] triton:python/triton/language/core.py:{i * 10}-{i * 10 + 9}  def f{i}\n" + "x" * 300
                     for i in range(1, 9))  # fmt: skip
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for i in range(4):
        messages.append({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm" * 500, "signature": "sig"},
            tool_use("search", {"query": f"q{i}"}, f"s{i}"),
        ]})  # fmt: skip
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"s{i}", "content": hits}],
            }
        )
    recent = copy.deepcopy(messages[-4:])
    report = trim(messages, target_tokens=100, keep_recent=4)
    assert report.blocks > 0 and report.tokens_after < report.tokens_before
    assert messages[0]["content"] == "task" and messages[-4:] == recent
    summary = messages[2]["content"][0]["content"]
    assert summary.startswith("[trimmed from ")
    assert "[1] triton:python/triton/language/core.py:10-19" in summary  # ids stay readable
    assert [b["type"] for b in messages[1]["content"]] == ["tool_use"]  # old thinking dropped
    assert messages[1]["content"][0]["id"] == "s0"
    again = trim(messages, target_tokens=100, keep_recent=4)
    assert again.blocks == 0  # nothing is trimmed twice


def test_metrics_are_read_from_the_harness_verdict() -> None:
    doc = gpu_doc(12.5, 0.64)
    assert verdict_metrics(doc) == {
        "time_us": 12.5,
        "roofline": 0.64,
        "speedup": 1.5,
        "bound": "memory",
    }
    outcome = Outcome.from_verdict(doc)
    assert outcome.ok and outcome.level == 7 and outcome.timed
    text = render_feedback(4, outcome, "PASSED all rungs.", doc, ("dump",))
    assert (
        text.splitlines()[0]
        == "version 4: PASSED  12.5 us, 64% of roofline (memory), 1.50x the reference"
    )
    assert "dump: not available" in text
    cpu = gpu_doc(1.0, 0.1)
    cpu["rungs"] = cpu["rungs"][:5]  # no benchmark or roofline rung; run's elapsed_s is not a time
    cpu["summary"] = None
    assert verdict_metrics(cpu) == {
        "time_us": None,
        "roofline": None,
        "speedup": None,
        "bound": None,
    }
    failed = {"ok": False, "failed_rung": "compile", "reason": "NameError", "rungs": [
        {"name": "pre-checks", "ok": True}, {"name": "compile", "ok": False}]}  # fmt: skip
    assert Outcome.from_verdict(failed).headline() == "FAILED at compile: NameError"
    assert Outcome.from_verdict(failed).level == 1
    # what the harness writes: Verdict.summary through to_json, read back by the agent
    from harness.verdict import PerformanceSummary, Verdict

    verdict = Verdict(ok=True, problem="p", problem_format="native", candidate="c.py",
                      backend="triton", device="cuda", interpreter=False, rungs=[],
                      summary=PerformanceSummary("n=1", 0.5, None, 90.0, "compute"))  # fmt: skip
    assert verdict_metrics(verdict.to_json()) == {
        "time_us": 500.0, "roofline": 0.9, "speedup": None, "bound": "compute"}  # fmt: skip
    timed_only = PerformanceSummary("n=1", 2.0, 1.25)  # the roofline rung was skipped
    doc = {**verdict.to_json(), "summary": timed_only.to_json()}
    assert verdict_metrics(doc) == {"time_us": 2000.0, "roofline": None, "speedup": 1.25,
                                    "bound": None}  # fmt: skip


def test_prices_and_costs() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000,
                  cache_write_tokens=400_000)  # fmt: skip
    sonnet = price_for("claude-sonnet-4-5-20250929")
    assert sonnet == Price(3.0, 15.0, "table")
    assert sonnet.cost(usage) == pytest.approx(3.0 + 1.5 + 0.6 + 1.5)
    assert price_for("claude-opus-4-1") == Price(15.0, 75.0, "table")
    assert price_for("claude-opus-4-5") == Price(5.0, 25.0, "table")
    assert price_for("claude-sonnet-5-5") == Price(3.0, 15.0, "family estimate")
    assert price_for("my-own-model") is None
    assert Price.parse("2.5,10") == Price(2.5, 10.0, "option")
    with pytest.raises(ValueError):
        Price.parse("cheap")


def test_thinking_and_temperature_options() -> None:
    assert thinking_param(None) is None and thinking_param("adaptive") == {"type": "adaptive"}
    assert thinking_param(2048) == {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(ValueError):
        thinking_param(100)
    plain = ModelSettings(model="m", max_tokens=100, temperature=0.3).request_params()
    assert plain == {"model": "m", "max_tokens": 100, "temperature": 0.3}
    thinking = ModelSettings(
        model="m", max_tokens=9000, temperature=0.3, thinking=thinking_param(4096)
    )
    assert "temperature" not in thinking.request_params()  # the API takes none with thinking


def test_tracing_is_offered_to_the_agent_where_it_can_run() -> None:
    """The backend primer carries the tracing how-to on a GPU, and check_kernel can ask for it."""
    from dataclasses import fields

    from ctxkernel.agent.check_tool import SHOW_CHOICES, check_schema, with_requests
    from ctxkernel.agent.prompt import DeviceInfo, load_brief, system_prompt
    from harness.runner import RunOptions

    brief = load_brief(EXAMPLES / "matmul_bf16")
    gpu = system_prompt(brief, "triton", DeviceInfo("cuda", "NVIDIA H200"), 0.8)
    cpu = system_prompt(brief, "triton", DeviceInfo("cpu", "cpu (Triton interpreter)"), 0.8)
    assert "pl.enter_scope" in gpu and 'show: ["trace"]' in gpu
    assert "pl.enter_scope" not in cpu  # no tracing without a GPU: not worth the tokens
    assert "trace" in SHOW_CHOICES
    assert "trace" in check_schema(False)["properties"]["show"]["items"]["enum"]
    if "trace" in {f.name for f in fields(RunOptions)}:
        assert with_requests(RunOptions(), ["trace"], None).trace is True
