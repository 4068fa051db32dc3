"""The optional cross-encoder rerank with a real CrossEncoder saved to a local directory.

No cross-encoder ships offline, so the test builds one from the offline MiniLM weights
(a seeded, untrained scoring head): the scores mean nothing, but loading, scoring, the
re-ordering and the errors are the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import Workspace
from ctxkernel.embedders.model import resolve_model
from ctxkernel.rerank import RERANK_POOL, pair_text

from .conftest import CliResult


@pytest.fixture(scope="module")
def cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(0)
    target = tmp_path_factory.mktemp("cross-encoder")
    CrossEncoder(resolve_model(None)[1], num_labels=1).save(str(target))
    return target


@pytest.fixture
def ws(isolated_home: Path) -> Workspace:
    return Workspace()


QUERY = "avoid bank conflicts with a swizzled shared memory layout"


def test_rerank_orders_the_fused_candidates_by_the_cross_encoder(
    ws: Workspace, demo_corpus: str, cross_encoder_dir: Path
) -> None:
    from sentence_transformers import CrossEncoder

    ws.index(demo_corpus)
    fused = ws.search(QUERY, k=RERANK_POOL)
    reranked = ws.search(QUERY, k=3, rerank=True, rerank_model=str(cross_encoder_dir))
    assert reranked.mode == "hybrid+rerank"
    assert len(reranked.hits) == min(3, len(fused.hits))
    assert {h.chunk.id for h in reranked.hits} <= {h.chunk.id for h in fused.hits}
    expected = CrossEncoder(str(cross_encoder_dir)).predict(
        [(QUERY, pair_text(h)) for h in fused.hits]
    )
    by_id = {h.chunk.id: float(s) for h, s in zip(fused.hits, expected, strict=True)}
    best = sorted(by_id, key=lambda i: -by_id[i])[:3]
    assert [h.chunk.id for h in reranked.hits] == best
    for hit in reranked.hits:
        assert hit.via == "hybrid+rerank"
        assert hit.score == pytest.approx(by_id[hit.chunk.id], abs=1e-5)
        assert "fused_score" in hit.extra
    assert [h.rank for h in reranked.hits] == list(range(1, len(reranked.hits) + 1))


def test_rerank_is_off_by_default(ws: Workspace, demo_corpus: str) -> None:
    ws.index(demo_corpus)
    assert all(h.via == "hybrid" for h in ws.search(QUERY, k=3).hits)


def test_cli_rerank_json_and_errors(
    demo_corpus: str,
    cross_encoder_dir: Path,
    run_cli: Callable[..., CliResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run_cli("index", demo_corpus).code == 0
    monkeypatch.delenv("CTXKERNEL_RERANK_MODEL", raising=False)
    missing = run_cli("search", QUERY, "--rerank")
    assert missing.code == 2
    assert "--rerank-model" in missing.err and "Traceback" not in missing.err
    nowhere = run_cli("search", QUERY, "--rerank-model", str(tmp_path / "absent"))
    assert nowhere.code == 2 and "not a local directory" in nowhere.err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no config.json" in run_cli("search", QUERY, "--rerank-model", str(empty)).err

    monkeypatch.setenv("CTXKERNEL_RERANK_MODEL", str(cross_encoder_dir))
    ok = run_cli("search", QUERY, "--rerank", "-k", "2", "--json")
    assert ok.code == 0, ok.err
    lines = [json.loads(line) for line in ok.out.splitlines()]
    hits = [line for line in lines if line.get("type") != "summary"]
    assert len(hits) == 2 and hits[0]["score"] >= hits[1]["score"]
    assert lines[-1]["mode"] == "hybrid+rerank"
