"""`docs` of a PTX name where the ptx corpus is not indexed (as after `make demo`) says to
index ptx, instead of "nothing documents" or a wrapper of another corpus alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from retrieval.conftest import CliResult, Repo

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet

from .conftest import DemoIndex


@pytest.mark.parametrize("topic", [".reqntid", "wgmma.mma_async", "cp.async.bulk.tensor"])
def test_docs_of_a_ptx_name_without_the_ptx_corpus_says_to_index_it(
    demo_index: DemoIndex, ws: Workspace, run_cli: Callable[..., CliResult], topic: str
) -> None:
    assert "ptx" not in ws.store.corpora()
    res = run_cli("docs", topic, "--index-dir", str(demo_index.index_dir))
    assert "Traceback" not in res.err
    assert "ctxkernel index ptx" in res.out.splitlines()[0], res.out
    doc = json.loads(run_cli("docs", topic, "--index-dir", str(demo_index.index_dir), "--json").out)
    assert "ctxkernel index ptx" in doc["hint"]
    text = ToolSet(ws).run("docs", {"topic": topic})
    assert "ctxkernel index ptx" in text.splitlines()[0]


def test_docs_gives_no_ptx_hint_for_other_names_or_a_chosen_corpus(
    demo_index: DemoIndex, ws: Workspace, run_cli: Callable[..., CliResult]
) -> None:
    for args in (("make_tiled_copy",), ("tl.dot",), (".reqntid", "--corpus", "demo")):
        doc = json.loads(
            run_cli("docs", *args, "--index-dir", str(demo_index.index_dir), "--json").out
        )
        assert doc["hint"] == "", args


# Functions that share a word with a PTX instruction but document nothing of it: a
# barrier's ``sync`` (the last part of ``mma.sync``) and a profiler's ``MMA`` mode (the
# last part of ``tcgen05.mma``, matched case-insensitively).
LOOKALIKES = {
    "src/pipeline/helpers.py": '''\
class NamedBarrier:
    """A named barrier over some warps."""

    def sync(self):
        """Wait until every warp of the barrier arrives."""
        return None
''',
    "src/profiler/mode.py": '''\
class MMA:
    """Profile the MMA units."""

    level = 3
''',
}


@pytest.fixture
def lookalikes(demo_corpus: str, upstream: Repo, tmp_path: Path) -> Workspace:
    for rel, text in LOOKALIKES.items():
        upstream.write(rel, text)
    upstream.commit("lookalikes")
    ws = Workspace(tmp_path / "index")
    ws.index(demo_corpus)
    return ws


@pytest.mark.parametrize("topic", ["mma.sync", "tcgen05.mma"])
def test_docs_of_a_ptx_name_without_ptx_claims_no_exact_hit_from_a_lookalike(
    lookalikes: Workspace, run_cli: Callable[..., CliResult], topic: str
) -> None:
    index = ["--index-dir", str(lookalikes.store.index_dir)]
    res = run_cli("docs", topic, "--json", *index)
    doc = json.loads(res.out)
    assert res.code == 1 and not doc["found"] and doc["how"] == "none", doc
    assert doc["best"] is None and "ctxkernel index ptx" in doc["hint"]
    # the barrier's sync and the profiler's MMA are not even offered as related
    offered = {a["symbol"] for a in doc["alternatives"]}
    assert not offered & {"NamedBarrier", "MMA"}, offered
    plain = run_cli("docs", topic, *index)
    assert plain.code == 1 and "ctxkernel index ptx" in plain.out.splitlines()[0]
    assert "nothing documents" in plain.out


def test_docs_of_an_sm100_name_on_sm90_exits_1_saying_what_it_needs(
    lookalikes: Workspace, run_cli: Callable[..., CliResult]
) -> None:
    """As docs/retrieval.md says: ``docs tcgen05.mma --arch sm_90`` exits 1, "needs sm_100a"."""
    index = ["--index-dir", str(lookalikes.store.index_dir)]
    res = run_cli("docs", "tcgen05.mma", "--arch", "sm_90", *index)
    assert res.code == 1, res
    assert "tcgen05.mma needs sm_100a: sm_90 cannot run it" in res.out.splitlines()[0]
    doc = json.loads(run_cli("docs", "tcgen05.mma", "--arch", "sm_90", "--json", *index).out)
    assert not doc["found"] and doc["arch"] == "sm_90"


def test_docs_of_a_qualified_name_found_outside_its_module_is_not_exact(
    lookalikes: Workspace,
) -> None:
    """``tl.MMA`` asks for an MMA under triton/language; a profiler's MMA elsewhere is a
    same-named thing ("name"), not the definition asked for ("exact")."""
    result = lookalikes.docs("tl.MMA")
    assert result.best is not None and result.best.chunk.path == "src/profiler/mode.py"
    assert result.how == "name"
    assert lookalikes.docs("RingBuffer").how == "exact"
