"""The store records which embedder built each corpus: a search uses that one, another
embedder re-embeds the stored chunks (nothing re-chunked, the cache per embedder reused),
an interrupted switch leaves the old vectors answering, and never are two mixed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctxkernel import Workspace
from ctxkernel.embedders.embed import TransformerEmbedder
from ctxkernel.errors import UserError

from .conftest import Repo


def test_the_record_names_the_embedder_and_search_follows_it(demo_corpus: str) -> None:
    Workspace().index(demo_corpus)
    record = Workspace().store.record(demo_corpus)
    assert record is not None
    assert record.embedder == "static" and record.model.startswith("static-")
    assert record.dim == 64 and len(record.recipe) == 12
    minilm = Workspace(embed="minilm")
    report = minilm.index(demo_corpus)
    # only the vectors were redone: no file re-chunked, every chunk embedded once
    assert report.files_changed == 0 and report.files_unchanged == 3
    assert report.embedded == report.chunks_total > 0
    record = minilm.store.record(demo_corpus)
    assert record is not None and record.model == "all-MiniLM-L6-v2@128" and record.dim == 384
    cache = minilm.store.cache(demo_corpus)
    assert cache.dense().matrix.shape == (cache.count(), 384)
    # the other embedder's vectors are gone once the switch finished
    rows = cache.db().execute("SELECT DISTINCT embedder FROM vectors").fetchall()
    assert rows == [("all-MiniLM-L6-v2@128",)]
    # a plain search (static is the default embedder) uses the corpus's own: MiniLM
    ws = Workspace()
    hits = ws.search("avoid bank conflicts when reading columns of a tile", mode="dense").hits
    assert hits and isinstance(ws.searcher.embedder_for(demo_corpus), TransformerEmbedder)
    # switching back re-embeds nothing: the static vectors are still in the cache
    back = Workspace(embed="static").index(demo_corpus)
    assert back.embedded == 0 and back.embeddings_reused == back.chunks_total


def test_search_insisting_on_another_embedder_is_a_clear_error(
    demo_corpus: str, run_cli: object
) -> None:
    Workspace().index(demo_corpus)
    with pytest.raises(UserError, match=r"embedded with static-.*not all-MiniLM"):
        Workspace(embed="minilm").search("ring buffer", corpora=[demo_corpus])
    result = run_cli("search", "ring buffer", "--embed", "minilm")  # type: ignore[operator]
    assert result.code == 2 and "was embedded with static-" in result.err
    assert "Traceback" not in result.err


def test_interrupted_switch_keeps_the_old_vectors_answering(
    demo_corpus: str, upstream: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    Workspace().index(demo_corpus)
    before = Workspace().store.record(demo_corpus)
    assert before is not None
    calls = {"n": 0}
    real = TransformerEmbedder.embed

    def dying_embed(self: TransformerEmbedder, texts: list[str], **kw: object) -> object:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(self, texts, **kw)  # type: ignore[arg-type]

    import ctxkernel.indexer as indexer

    monkeypatch.setattr(indexer, "EMBED_GROUP", 1)  # one text per group
    monkeypatch.setattr(TransformerEmbedder, "embed", dying_embed)
    with pytest.raises(KeyboardInterrupt):
        Workspace(embed="minilm").index(demo_corpus)
    monkeypatch.setattr(TransformerEmbedder, "embed", real)
    ws = Workspace()
    record = ws.store.record(demo_corpus)
    assert record is not None and record.model == before.model and not record.complete
    cache = ws.store.cache(demo_corpus)
    assert cache.dense().embedder == before.model  # the snapshot searched is all static
    assert ws.search("softmax of each row", mode="dense").hits
    done = Workspace(embed="minilm").index(demo_corpus)
    assert done.embeddings_reused >= 1  # the text embedded before the interrupt
    assert Workspace().store.record(demo_corpus).model == "all-MiniLM-L6-v2@128"  # type: ignore[union-attr]


def test_vectors_are_written_with_their_chunks(demo_corpus: str, upstream: Repo) -> None:
    """One transaction per batch of files: every stored chunk has exactly one vector of
    the corpus's embedder, and the snapshot's rows are the cache's rows."""
    ws = Workspace()
    ws.index(demo_corpus)
    upstream.write("src/extra.py", "def extra():\n    '''An extra helper.'''\n    return 1\n")
    upstream.commit("extra")
    ws.update(demo_corpus)
    cache = ws.store.cache(demo_corpus)
    record = ws.store.record(demo_corpus)
    assert record is not None
    assert cache.rows_without_vectors(record.model) == []
    rows = sorted(r for (r,) in cache.db().execute("SELECT row FROM chunks"))
    assert sorted(int(r) for r in cache.dense().rows) == rows
    norms = np.linalg.norm(np.asarray(cache.dense().matrix), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-4)


def test_hybrid_search_in_a_fresh_process_needs_no_model_stack(
    demo_corpus: str, isolated_home: Path
) -> None:
    """The default search path (static vectors, numpy BM25) imports neither torch,
    sentence-transformers, chromadb, bm25s nor scipy."""
    Workspace().index(demo_corpus)
    code = (
        "import sys\n"
        "from ctxkernel.cli import main\n"
        "try:\n"
        "    main(['search', 'avoid bank conflicts in shared memory', '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = ('torch', 'sentence_transformers', 'chromadb', 'bm25s', 'scipy', 'model2vec')\n"
        "print('IMPORTED', sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert '"type": "hit"' in out.stdout
    assert "IMPORTED []" in out.stderr


@pytest.mark.gpu
def test_minilm_runs_on_the_gpu_in_fp16_large_batches() -> None:
    cpu = TransformerEmbedder(device="cpu")
    gpu = TransformerEmbedder(device="cuda")
    texts = [f"tile {i}: load a block of memory with a mask in triton" for i in range(600)]
    a = cpu.embed(texts[:8])
    b = gpu.embed(texts)
    model = gpu._model()
    assert next(model.parameters()).dtype.is_floating_point and "16" in str(
        next(model.parameters()).dtype
    )
    assert b.dtype == np.float32 and b.shape == (600, 384)
    cos = (a * b[:8]).sum(axis=1)
    assert cos.min() > 0.999


def test_a_store_from_before_local_vectors_asks_for_a_reindex(demo_corpus: str) -> None:
    """Regression: a local store whose vectors lived in chroma would answer nothing dense;
    a search says what to do, and the index run rebuilds it reusing the embeddings."""
    import json

    ws = Workspace()
    ws.index(demo_corpus)
    records = ws.store.index_dir / "records.json"
    data = json.loads(records.read_text())
    data[demo_corpus]["store_format"] = 0
    records.write_text(json.dumps(data))
    with pytest.raises(UserError, match="indexed by an older ctxkernel"):
        Workspace().search("ring buffer", corpora=[demo_corpus])
    report = Workspace().index(demo_corpus)
    assert report.files_changed == 3 and report.embedded == 0
    assert Workspace().search("ring buffer", corpora=[demo_corpus]).hits


def test_embedder_commands_describe_and_build(run_cli: object) -> None:
    import json

    info = run_cli("embedder", "info", "--json")  # type: ignore[operator]
    assert info.code == 0
    row = json.loads(info.out)
    assert row["type"] == "embedder" and row["preset"] == "tiny" and row["pca_dims"] == 64
    built = run_cli("embedder", "build", "--json")  # type: ignore[operator]
    assert built.code == 0 and json.loads(built.out)["built"] is True
    bad = run_cli("embedder", "build", "--recipe", "huge")  # type: ignore[operator]
    assert bad.code == 2
