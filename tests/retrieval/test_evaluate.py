"""`ctxkernel eval` on a corpus the test indexes (real index, real embedder): several
query sets in one run, per-corpus/per-kind groups with nDCG, two index directories and
search settings compared on the same queries, file-level scoring, misses held back for
the test set."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import Workspace
from ctxkernel import lexical as lexical_module
from ctxkernel import search as search_module
from ctxkernel.evaluate import Config, Target, applied, load_query_sets, score

from .conftest import CliResult, Repo

FOUND_PROSE = "avoid bank conflicts when reading columns of a tile in shared memory"


def _write_set(path: Path, rows: list[dict[str, object]]) -> Path:
    lines = ["// a comment line the loader skips"] + [json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _rows(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture
def indexed(isolated_home: Path, demo_corpus: str) -> str:
    Workspace().index(demo_corpus)
    return demo_corpus


@pytest.fixture
def query_sets(tmp_path: Path) -> tuple[Path, Path]:
    dev = _write_set(
        tmp_path / "eval-dev.jsonl",
        [
            {
                "id": "found-prose",
                "corpus": "demo",
                "kind": "howto",
                "query": FOUND_PROSE,
                "relevant": ["src/kernels.py#planted_swizzle_shared_memory_banks"],
            },
            {
                "id": "found-name",
                "corpus": "demo",
                "kind": "api",
                "query": "make_tiled_copy",
                "relevant": ["include/copy.hpp#make_tiled_copy"],
            },
            {
                "id": "never",  # a line range no chunk overlaps: never found
                "corpus": "demo",
                "kind": "howto",
                "query": "numerically stable softmax of each row",
                "relevant": ["src/kernels.py:9000-9001"],
            },
        ],
    )
    test = _write_set(
        tmp_path / "eval-test.jsonl",
        [
            {
                "id": "test-never",
                "corpus": "demo",
                "kind": "howto",
                "query": "ring of pipeline stages for a producer and a consumer",
                "relevant": ["docs/guide.md:9000-9001"],
            },
            {
                "id": "test-found",
                "corpus": "demo",
                "kind": "api",
                "query": "make_tiled_copy",
                "relevant": ["include/copy.hpp#make_tiled_copy"],
            },
        ],
    )
    return dev, test


def test_eval_reports_every_set_with_groups_and_ndcg(
    indexed: str, query_sets: tuple[Path, Path], run_cli: Callable[..., CliResult]
) -> None:
    dev, test = query_sets
    res = run_cli("eval", str(dev), f"held={test}", "--modes", "hybrid,lexical", "--json")
    assert res.code == 0, res.err
    rows = [r for r in _rows(res.out) if r["type"] == "eval"]
    assert {r["set"] for r in rows} == {"dev", "held"}  # eval-dev.jsonl is named dev
    assert {r["mode"] for r in rows} == {"hybrid", "lexical"}
    dev_all = next(
        r for r in rows if r["set"] == "dev" and r["mode"] == "hybrid" and r["group"] == "all"
    )
    for key in ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "p50_ms", "p95_ms"):
        assert key in dev_all
    # two of three found first, one never: recall@1 = recall@10 = MRR = 2/3
    assert dev_all["n"] == 3
    assert dev_all["recall@10"] == pytest.approx(0.667, abs=0.001)
    assert dev_all["mrr@10"] == pytest.approx(0.667, abs=0.001)
    groups = {r["group"] for r in rows if r["set"] == "dev" and r["mode"] == "hybrid"}
    assert groups == {"all", "corpus=demo", "kind=howto", "kind=api"}
    api = next(
        r for r in rows if r["set"] == "dev" and r["mode"] == "hybrid" and r["group"] == "kind=api"
    )
    assert api["recall@1"] == 1.0 and api["ndcg@10"] == 1.0
    howto = next(
        r
        for r in rows
        if r["set"] == "dev" and r["mode"] == "hybrid" and r["group"] == "kind=howto"
    )
    assert howto["n"] == 2 and howto["recall@10"] == 0.5


def test_eval_compares_two_index_directories_on_the_same_queries(
    indexed: str,
    upstream: Repo,
    query_sets: tuple[Path, Path],
    tmp_path: Path,
    run_cli: Callable[..., CliResult],
) -> None:
    # a second index of the corpus after the planted function was removed upstream
    text = (upstream.path / "src/kernels.py").read_text()
    start = text.index("def planted_swizzle_shared_memory_banks")
    end = text.index("def softmax_rows")
    upstream.write("src/kernels.py", text[:start] + text[end:])
    upstream.commit("drop the swizzle helper")
    other = tmp_path / "other-index"
    Workspace(index_dir=other).index(indexed)

    dev, _ = query_sets
    res = run_cli(
        "eval", str(dev), "--modes", "hybrid", "--against-index-dir", str(other), "--json"
    )
    assert res.code == 0, res.err
    rows = _rows(res.out)
    evals = {(r["config"], r["group"]): r for r in rows if r["type"] == "eval"}
    assert evals[("base", "kind=howto")]["recall@10"] == 0.5
    assert evals[("against", "kind=howto")]["recall@10"] == 0.0
    cmp = next(r for r in rows if r["type"] == "compare" and r["group"] == "kind=howto")
    assert cmp["config"] == "against" and cmp["against"] == "base"
    assert cmp["delta_recall@10"] == -0.5
    assert cmp["worse"] == 1 and cmp["better"] == 0
    same = next(r for r in rows if r["type"] == "compare" and r["group"] == "kind=api")
    assert same["delta_mrr@10"] == 0.0 and same["worse"] == 0

    table = run_cli("eval", str(dev), "--modes", "hybrid", "--against-index-dir", str(other))
    assert table.code == 0
    assert "set dev" in table.out and "against" in table.out and "-0.500" in table.out


def test_eval_config_settings_reach_the_searcher_and_are_restored(
    indexed: str, query_sets: tuple[Path, Path], run_cli: Callable[..., CliResult]
) -> None:
    ws = Workspace()
    default_dense = ws.searcher.weights.dense
    default_rrf = search_module.RRF_K
    cfg = Config.parse("heavy=dense:3.5,RRF_K:41")
    with applied(ws.searcher, cfg.settings):
        assert ws.searcher.weights.dense == 3.5
        assert search_module.RRF_K == 41
        assert ws.search(FOUND_PROSE, k=3).hits
    assert ws.searcher.weights.dense == default_dense
    assert default_rrf == search_module.RRF_K

    dev, _ = query_sets
    res = run_cli("eval", str(dev), "--modes", "hybrid", "--config", "heavy=dense:3.5", "--json")
    assert res.code == 0, res.err
    configs = {r["config"] for r in _rows(res.out) if r["type"] == "eval"}
    assert configs == {"base", "heavy"}
    assert any(r["type"] == "compare" and r["config"] == "heavy" for r in _rows(res.out))

    listed = run_cli("eval", str(dev), "--settings")
    assert "dense = " in listed.out and "RRF_K = " in listed.out
    # the other ranking modules' constants, by their module's name
    assert "lexical.FILE_BY_BODY = True" in listed.out, listed.out
    assert "TYPE_CHECKING" not in listed.out and "SCHEMA" not in listed.out
    with applied(ws.searcher, {"lexical.FILE_BY_BODY": "false"}):
        assert lexical_module.FILE_BY_BODY is False
    assert lexical_module.FILE_BY_BODY is True

    bad = run_cli("eval", str(dev), "--config", "x=no_such_knob:1")
    assert bad.code == 2 and "unknown setting 'no_such_knob'" in bad.err
    assert "Traceback" not in bad.err and len(bad.err.strip().splitlines()) == 1
    wrong_type = run_cli("eval", str(dev), "--config", "x=dense:lots")
    assert wrong_type.code == 2 and "not a float" in wrong_type.err


def test_file_level_scoring_counts_a_hit_in_the_target_file(indexed: str) -> None:
    ws = Workspace()
    hits = ws.search("numerically stable softmax of each row", k=10).hits
    assert any(h.chunk.path == "src/kernels.py" for h in hits)
    unreachable = [Target.parse("src/kernels.py:9000-9001")]
    assert score(hits, unreachable)[0] == 0
    first, ndcg = score(hits, unreachable, file_level=True)
    assert first == next(i for i, h in enumerate(hits, 1) if h.chunk.path == "src/kernels.py")
    assert ndcg > 0


def test_name_target_needs_a_whole_word_title_match() -> None:
    from ctxkernel.corpus import Chunk, Hit

    chunk = Chunk("c", "core.py", 1, 9, "text", title="def dot_scaled(lhs, rhs)")
    assert not Target.parse("core.py#dot").matches(Hit(chunk))
    assert Target.parse("core.py#dot_scaled").matches(Hit(chunk))
    heading = Chunk("c", "guide.md", 1, 9, "text", title="Partitioning a Tensor")
    assert Target.parse("guide.md#Partitioning a Tensor").matches(Hit(heading))


def test_misses_of_the_test_set_are_held_back_unless_asked(
    indexed: str, query_sets: tuple[Path, Path], run_cli: Callable[..., CliResult]
) -> None:
    dev, test = query_sets
    res = run_cli("eval", str(dev), str(test), "--modes", "hybrid", "--misses", "--json")
    assert res.code == 0, res.err
    missed = [r for r in _rows(res.out) if r["type"] == "miss"]
    assert [m["id"] for m in missed] == ["never"]
    asked = run_cli(
        "eval", str(dev), str(test), "--modes", "hybrid", "--misses-of", "test", "--json"
    )
    assert [r["id"] for r in _rows(asked.out) if r["type"] == "miss"] == ["test-never"]

    md = run_cli("eval", str(dev), "--modes", "hybrid", "--markdown")
    assert md.code == 0
    assert md.out.startswith("| set | group | mode | config |")
    assert "| dev | all | hybrid | base | 3 |" in md.out


def test_bad_query_sets_fail_with_one_line(
    tmp_path: Path, query_sets: tuple[Path, Path], run_cli: Callable[..., CliResult]
) -> None:
    dev, _ = query_sets
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"query": "x", "corpus": "demo"}\n')
    res = run_cli("eval", str(broken))
    assert res.code == 2 and "broken.jsonl:1: bad query line" in res.err
    dup = run_cli("eval", f"a={dev}", f"a={dev}")
    assert dup.code == 2 and "two query sets are named 'a'" in dup.err
    with pytest.raises(Exception, match="two query sets"):
        load_query_sets([str(dev), str(dev)])
