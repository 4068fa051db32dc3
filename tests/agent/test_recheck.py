"""Proving the best: a version is re-checked in a fresh worker on shapes and seeds the
model never saw before it is declared best. A planted kernel that is exact on the public
shapes and wrong on others is never the best and the summary says it overfit (the real
harness, Triton's interpreter on CPU); where there is timing, a new best is re-timed
side by side with the previous one (a simulated GPU harness)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ctxkernel.agent import Agent, AgentConfig
from ctxkernel.agent.check_tool import CheckOutcome, Outcome
from ctxkernel.tools import ToolSet

from .conftest import make_client
from .scripted import Reply, ScriptedAPI, last_user_text, text, tool_use
from .test_agent_units import gpu_doc

KERNEL = """\
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(GRID,)](x, y, out, n, BLOCK=256)
    return out
"""
# exact on the public sizes (multiples of 256), wrong on a ragged one: the grid drops the tail
FLOOR_GRID = KERNEL.replace("GRID", "n // 256")
HONEST = KERNEL.replace("GRID", "triton.cdiv(n, 256)")
PROBLEM = '''"""fp32 vector add on sizes that are multiples of 256 (the public ones)."""
import torch

SHAPES = [{"n": 256}, {"n": 1024}]


def generate_input(seed, n, device="cpu"):
    gen = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(n, generator=gen, device=device), torch.randn(n, generator=gen, device=device))


def ref_kernel(inputs):
    x, y = inputs
    return x + y
'''


def test_a_kernel_exact_only_on_the_public_shapes_is_never_the_best(
    tmp_path: Path, api_env: None, isolated_home: Path
) -> None:
    folder = tmp_path / "add256"
    folder.mkdir()
    (folder / "problem.py").write_text(PROBLEM)

    def policy(body: dict[str, Any], index: int) -> Reply:
        said = last_user_text(body)
        if index == 0:
            return Reply(
                [tool_use("check_kernel", {"source": FLOOR_GRID, "notes": "grid n // 256"}, "t1")]
            )
        if "version 1: FAILED on an unseen shape" in said and index == 1:
            return Reply([tool_use("check_kernel", {"source": HONEST, "notes": "cdiv grid"}, "t2")])
        return Reply([text("done")], stop_reason="end_turn")

    with ScriptedAPI(policy).serve() as api:
        config = AgentConfig(problem=str(folder), device="cpu", trials=1, max_iters=4)
        result = Agent.start(config, make_client(api.url), toolset=ToolSet()).run()

    summary = result.summary
    assert summary["overfit"] == [1] and summary["correct_versions"] == 1
    assert summary["best"]["version"] == 2 and summary["best"]["proof"] == "proven"
    assert summary["best"]["unseen_shapes"] >= 2 and summary["stop_reason"] == "target"
    record = result.record
    v1, v2 = record.versions()
    assert v1["ok"] is False and v1["overfit"] is True and v1["failed_rung"] == "unseen-shapes"
    assert v1["reason"] == "overfits the public shapes"
    shapes = v1["proof"]["shapes"]
    assert len(shapes) >= 2 and all(s["n"] not in (256, 1024) for s in shapes)
    assert any(s["n"] % 2 == 1 for s in shapes)
    recheck = json.loads((record.version_dir(1) / "recheck" / "verdict.json").read_text())
    assert recheck["ok"] is False  # kept for the engineer, who may see which shape
    assert v2["proof"]["status"] == "proven"
    assert (record.path / "best.py").read_text() == HONEST

    # the model hears that v1 failed on an unseen shape, never which one
    said = last_user_text(api.requests[1])
    assert said.startswith("version 1: FAILED on an unseen shape")
    for shape in shapes:
        assert not re.search(rf"\bn\s*=\s*{shape['n']}\b", said)
        assert shape["n"] < 10 or not re.search(rf"\b{shape['n']}\b", said)
    assert v1["unseen_failure"].split(":")[0] not in ("", "None")
    assert "Next for version 1: make it correct on every size the problem allows" in said
    kinds = [e["type"] for e in record.transcript()]
    assert kinds.count("proof") == 2


def test_a_new_best_is_timed_side_by_side_with_the_previous_one(
    api_env: None, isolated_home: Path
) -> None:
    """v2 looks faster in its own check (20 us vs 30 us) but is slower when the two are
    benchmarked interleaved (35 us vs 30 us): v1 stays the best."""
    calls: list[tuple[str, list[int]]] = []
    race = {1: 30.0, 2: 35.0}
    looks = {1: (30.0, 0.5), 2: (20.0, 0.7), 3: (25.0, 0.6)}

    def evaluator(
        problem: Any, candidates: list[Path], options: Any, **kw: Any
    ) -> list[CheckOutcome]:
        versions = [int(p.read_text().split()[2]) for p in candidates]
        kind = "unseen" if options.shapes else ("race" if not options.bench_reference else "check")
        calls.append((kind, versions))
        out = []
        for k in versions:
            time_us, roof = looks[k]
            doc = gpu_doc(race[k] if kind == "race" else time_us, roof)
            out.append(CheckOutcome(Outcome.from_verdict(doc), "PASSED (gpu).", doc, 0.1))
        return out

    def policy(body: dict[str, Any], index: int) -> Reply:
        k = index + 1
        src = f"# version {k}\ndef custom_kernel(inputs):\n    ...\n"
        return Reply([tool_use("check_kernel", {"source": src, "notes": f"try {k}"}, f"toolu_{k}")])

    from .conftest import EXAMPLES

    with ScriptedAPI(policy).serve() as api:
        cfg = AgentConfig(
            problem=str(EXAMPLES / "vector_add"), device="cpu", max_iters=2, target=0.9
        )
        agent = Agent.start(cfg, make_client(api.url), toolset=ToolSet(), evaluator=evaluator)
        agent.prover.has_timing = True  # as on a GPU: the harness times kernels
        result = agent.run()
    assert calls == [("check", [1]), ("unseen", [1]), ("check", [2]), ("unseen", [2]),
                     ("race", [2]), ("race", [1]), ("race", [1]), ("race", [2])]  # fmt: skip
    v2 = result.record.versions()[1]
    assert v2["ok"] is True and v2["beaten_by"] == 1 and v2["proof"]["status"] == "slower"
    timing = v2["proof"]["timing"]
    assert timing["order"] == [2, 1, 1, 2] and timing["version_median_us"] == 35.0
    assert result.summary["best"]["version"] == 1
    state = result.record.load_state()
    assert state is not None
    said = last_user_text({"messages": state["messages"]})  # what the model reads next
    assert "Version 2 was not faster than version 1 when the two were timed side by side" in said
    assert "Best so far: version 1" in said


@pytest.mark.gpu
def test_on_a_gpu_a_best_is_rechecked_and_raced_in_fresh_workers(tmp_path: Path) -> None:
    """The real harness on a GPU: unseen shapes, then A B B A benchmarks of two honest
    vector adds (BLOCK 1024 and 4096), each in its own worker."""
    from ctxkernel.agent.check_tool import evaluate, timed
    from ctxkernel.agent.recheck import Prover
    from harness.runner import RunOptions
    from harness.runners import get_runner

    from .conftest import EXAMPLES

    honest = (EXAMPLES / "vector_add" / "solution_triton.py").read_text()
    paths = []
    for name, block in (("a", "1024"), ("b", "4096")):
        (tmp_path / name).mkdir()
        paths.append(tmp_path / name / "candidate.py")
        paths[-1].write_text(honest.replace("BLOCK = 1024", f"BLOCK = {block}"))
    options = timed(RunOptions(device="cuda", trials=2, record=False, backend="triton"), "cuda")
    runner = get_runner("local", 1)
    try:
        prover = Prover(str(EXAMPLES / "vector_add"), options, evaluate, lambda: runner,
                        has_timing=True)  # fmt: skip
        proof = prover.prove(2, paths[1], ({"version": 1}, paths[0]), keep=tmp_path / "keep")
    finally:
        runner.close()
    assert proof.status in ("proven", "slower"), proof
    assert len(proof.shapes) == 2 and all(s["n"] % 2 == 1 for s in proof.shapes)
    timing = proof.timing
    assert timing is not None and timing["order"] == [2, 1, 1, 2]
    assert len(timing["version_us"]) == 2 and len(timing["previous_us"]) == 2
    assert all(t > 0 for t in timing["version_us"] + timing["previous_us"])
    assert timing["faster"] == (proof.status == "proven")
    assert json.loads((tmp_path / "keep" / "verdict.json").read_text())["ok"] is True
