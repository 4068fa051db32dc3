"""Context efficiency beside Recall/MRR (the share of the judged lines an agent has read
after 2,000 and 8,000 tokens of the search tool's output, and of a scripted grep-only
agent's), and a plain-words question that reaches the tutorial teaching it rather than
the API file sharing its words."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import Workspace
from ctxkernel import context_eval as ce
from ctxkernel.evaluate import Query, Target

from .conftest import CliResult, Repo, define_corpus

# The API file: the words of the question are in its names and docstrings.
PIPELINE_PY = '''\
"""Pipeline state for producer and consumer stages."""


class PipelineState:
    """Index and phase of a stage in a multi-stage pipeline of shared memory buffers."""

    def __init__(self, stages):
        self.stages = stages
        self.index = 0
        self.phase = 0

    def advance(self):
        """Move to the next stage; flip the phase when the index wraps."""
        self.index += 1
        if self.index == self.stages:
            self.index = 0
            self.phase ^= 1


def make_pipeline(stages, producer_count, consumer_count):
    """Create a pipeline with stages, a producer barrier and a consumer barrier."""
    return PipelineState(stages)
'''

# The tutorial: teaches the concept in words, with a worked kernel.
TUTORIAL_PY = '''\
"""
Overlapping loads with math: a multi-stage pipeline
===================================================

In this tutorial you learn why a kernel keeps several stages of shared memory buffers in
flight, so that global memory loads overlap with the math of earlier stages, and how to
pick the number of stages: more stages hide more latency but use more shared memory.
"""


def pipelined_kernel(a, b, stages=3):
    # the producer fills stage i + stages - 1 while the consumer computes on stage i,
    # so the loads for later tiles are in flight while the math runs
    acc = 0
    for i in range(len(a)):
        acc += a[i] * b[i]
    return acc
'''


@pytest.fixture
def teaching_ws(isolated_home: Path, upstream: Repo) -> Workspace:
    upstream.write("src/pipeline.py", PIPELINE_PY)
    upstream.write("src/examples/tutorials/03_pipelining.py", TUTORIAL_PY)
    upstream.commit("api and tutorial")
    define_corpus(isolated_home, "demo", str(upstream.path))
    ws = Workspace()
    ws.index("demo")
    return ws


def test_a_plain_words_question_finds_the_tutorial_over_the_api_file(
    teaching_ws: Workspace,
) -> None:
    hits = teaching_ws.search(
        "why would I keep several stages of shared memory buffers so loads overlap with the "
        "math, and how many stages should I pick?",
        corpora=["demo"],
        k=5,
    ).hits
    paths = [h.chunk.path for h in hits]
    assert paths[0] == "src/examples/tutorials/03_pipelining.py", paths
    assert paths.index("src/examples/tutorials/03_pipelining.py") < paths.index("src/pipeline.py")


def test_share_counts_the_judged_lines_inside_each_budget() -> None:
    gold = [ce.Gold("a.py", frozenset(range(10, 20)))]
    shown = [(100, "a.py", n) for n in range(10, 15)] + [(3000, "a.py", n) for n in range(15, 20)]
    assert ce.share(shown, 2000, gold) == 0.5
    assert ce.share(shown, 8000, gold) == 1.0
    # a whole-file target counts once any line of the file is shown
    assert ce.share([(50, "b.py", 1)], 2000, [ce.Gold("b.py", None)]) == 1.0
    assert ce.share([(50, "c.py", 1)], 2000, gold) == 0.0


def test_both_readers_show_the_target_and_grep_terms_are_distinctive(
    teaching_ws: Workspace,
) -> None:
    q = Query(
        "several stages of shared memory buffers overlap loads with math",
        "demo",
        "howto",
        [Target("src/examples/tutorials/03_pipelining.py", start=1, end=8)],
    )
    gold = ce.gold_of(teaching_ws, q)
    searched = ce.shown_by_search(teaching_ws, q, 8000)
    assert ce.share(searched, 8000, gold) == 1.0
    terms = ce.grep_terms("how do I use make_tiled_copy with a TiledMMA for the epilogue")
    assert terms[:2] == ["make_tiled_copy", "tiledmma"] and "with" not in terms
    grepped = ce.shown_by_grep_agent(teaching_ws, q, 8000)
    assert grepped and all(used <= 8000 for used, _, _ in grepped)
    # a name target stands for the lines of the chunk that defines it
    named = Query("x", "demo", "api", [Target("src/pipeline.py", name="make_pipeline")])
    (g,) = ce.gold_of(teaching_ws, named)
    assert g.lines and min(g.lines) <= 22 <= max(g.lines)


def test_eval_reports_context_efficiency_beside_recall(
    teaching_ws: Workspace, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(
        json.dumps(
            {
                "query": "several stages of shared memory buffers overlap loads with math",
                "corpus": "demo",
                "kind": "howto",
                "relevant": ["src/examples/tutorials/03_pipelining.py:1-8"],
            }
        )
        + "\n"
    )
    r = run_cli("eval", f"dev={qfile}", "--modes", "hybrid", "--context", "--json")
    assert r.code == 0, r.err
    rows = [json.loads(line) for line in r.out.splitlines()]
    context = [x for x in rows if x["type"] == "context" and x["group"] == "all"]
    assert {x["reader"] for x in context} == {"search", "grep-agent"}
    searched = next(x for x in context if x["reader"] == "search")
    assert searched["ctx@2000"] == 1.0 and searched["ctx@8000"] == 1.0
    assert any(x["type"] == "eval" for x in rows)
    r = run_cli("eval", f"dev={qfile}", "--modes", "hybrid", "--context", "--markdown")
    assert "| search ctx@2000 |" in r.out
