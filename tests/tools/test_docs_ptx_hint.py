"""`docs` of a PTX name where the ptx corpus is not indexed (as after `make demo`) says to
index ptx, instead of "nothing documents" or a wrapper of another corpus alone."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from retrieval.conftest import CliResult

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
