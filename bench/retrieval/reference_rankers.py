"""Reference rankers on the evaluation sets, so ranking work knows where a naive approach
stands: the same queries and judgments as ``ctxkernel eval``, scored the same way.

usage::

    python bench/retrieval/reference_rankers.py --cutlass MIRROR/cutlass --triton MIRROR/triton \\
        --ptx MIRROR/ptx91 [--tilelang MIRROR/tilelang] --index-dir INDEX [--markdown | --json] \\
        dev=bench/queries/eval-dev.jsonl test=bench/queries/eval-test.jsonl old=bench/queries/dev.jsonl

Rankers:

- ``bm25-file``: Okapi BM25 (bm25s, k1 1.5, b 0.75) over whole files, each file of the
  mirror that the corpus definition indexes one document; tokens are lower-cased runs
  of letters and digits (``make_tiled_copy`` -> make, tiled, copy), English stop words
  dropped. It returns files, so it is scored at file level: a file counts when it holds
  a target. Its table has ``ctxkernel``'s hybrid search beside it, scored at file level
  too (``ours-file``), on the same queries in the same run.
- ``naive-fusion`` (with ``--index-dir``): reciprocal-rank fusion (k 60, equal weights)
  of BM25 over the index's chunks (same naive tokens, no fields, no symbol lists) and
  the index's vectors (of the embedder that built each corpus); scored at chunk level like ``ctxkernel eval``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mine_code import CorpusFiles

from ctxkernel.corpus import Chunk, Hit
from ctxkernel.evaluate import (
    Config,
    Query,
    WorkspaceRanker,
    compare,
    load_query_sets,
    markdown,
    run,
    summarize,
)
from ctxkernel.search import Filters

_TOKEN = re.compile(r"[A-Za-z0-9]+")
RRF_K = 60


def naive_tokens(text: str) -> list[str]:
    import bm25s

    stop = _stopwords(bm25s)
    return [t for t in (m.lower() for m in _TOKEN.findall(text)) if t not in stop]


_STOP: frozenset[str] | None = None


def _stopwords(bm25s: Any) -> frozenset[str]:
    global _STOP
    if _STOP is None:
        from bm25s.stopwords import STOPWORDS_EN

        _STOP = frozenset(STOPWORDS_EN)
    return _STOP


class _BM25:
    """bm25s over pre-tokenized documents; unknown query words are dropped."""

    def __init__(self, docs: Sequence[list[str]]) -> None:
        import bm25s

        self.index = bm25s.BM25(k1=1.5, b=0.75)
        self.index.index([d or [""] for d in docs], show_progress=False)
        self.vocab = set(self.index.vocab_dict)
        self.n = len(docs)

    def top(self, tokens: list[str], k: int) -> list[int]:
        tokens = [t for t in tokens if t in self.vocab]
        if not tokens:
            return []
        docs, scores = self.index.retrieve([tokens], k=min(k, self.n), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class WholeFileBM25:
    """BM25 over whole files of each corpus (see the module docstring)."""

    name = "bm25-file"
    modes: Sequence[str] = ("bm25-file",)

    def __init__(self, files: dict[str, CorpusFiles]) -> None:
        self.paths: dict[str, list[str]] = {}
        self.lines: dict[str, list[int]] = {}
        self.bm25: dict[str, _BM25] = {}
        for name, cf in files.items():
            paths = [p for p in cf.paths if cf.text(p)]
            self.paths[name] = paths
            self.lines[name] = [len((cf.text(p) or "").splitlines()) for p in paths]
            self.bm25[name] = _BM25([naive_tokens(f"{p}\n{cf.text(p)}") for p in paths])

    def corpora(self) -> set[str]:
        return set(self.bm25)

    def search(self, query: Query, mode: str, k: int) -> list[Hit]:
        name = query.corpus
        rows = self.bm25[name].top(naive_tokens(query.query), k)
        return [
            Hit(Chunk(name, self.paths[name][r], 1, max(1, self.lines[name][r]), ""), rank=i)
            for i, r in enumerate(rows, 1)
        ]


class NaiveFusion:
    """RRF of naive chunk BM25 and the index's dense vectors (see the module docstring)."""

    name = "naive-fusion"
    modes: Sequence[str] = ("naive-fusion",)

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.rows: dict[str, list[int]] = {}
        self.bm25: dict[str, _BM25] = {}
        for name in ws.store.corpora():
            cache = ws.store.synced_cache(name)
            rows, docs = [], []
            for row, path, text in cache.iter_rows("row, path, text"):
                rows.append(int(row))
                docs.append(naive_tokens(f"{path}\n{text}"))
            self.rows[name] = rows
            self.bm25[name] = _BM25(docs)

    def corpora(self) -> set[str]:
        return set(self.bm25)

    def search(self, query: Query, mode: str, k: int) -> list[Hit]:
        name = query.corpus
        depth = 60
        lexical = [
            self.rows[name][i] for i in self.bm25[name].top(naive_tokens(query.query), depth)
        ]
        cache = self.ws.store.synced_cache(name)
        searcher = self.ws.searcher
        vector = searcher.embedder_for(name).embed_query(query.query)
        dense = [row for row, _ in searcher._dense(name, cache, vector, depth, Filters())]
        scores: dict[int, float] = {}
        for ranked in (lexical, dense):
            for rank, row in enumerate(ranked, 1):
                scores[row] = scores.get(row, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(scores, key=lambda r: -scores[r])[:k]
        chunks = cache.chunks_by_rows(best)
        return [
            Hit(chunks[r], score=scores[r], rank=i) for i, r in enumerate(best, 1) if r in chunks
        ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queries", nargs="+", metavar="[NAME=]QUERIES")
    ap.add_argument("--cutlass", type=Path)
    ap.add_argument("--triton", type=Path)
    ap.add_argument("--ptx", type=Path)
    ap.add_argument("--tilelang", type=Path)
    ap.add_argument("--index-dir", default=None, help="the index for ours-file and naive-fusion")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    sets = load_query_sets(args.queries)
    roots = {"cutlass": args.cutlass, "triton": args.triton, "ptx": args.ptx}
    roots["tilelang"] = args.tilelang
    files = {name: CorpusFiles.load(name, root) for name, root in roots.items() if root}
    if not files:
        ap.error("give at least one mirror (--cutlass, --triton, --ptx, --tilelang)")
    print("indexing whole files ...", file=sys.stderr)
    rankers_file: list[Any] = [WholeFileBM25(files)]
    rankers_chunk: list[Any] = []
    if args.index_dir:
        from ctxkernel import Workspace

        ws = Workspace(args.index_dir)
        rankers_file.insert(0, WorkspaceRanker(ws, Config("ours-file")))
        print("indexing chunks for naive-fusion ...", file=sys.stderr)
        rankers_chunk.append(NaiveFusion(ws))
    results = run(rankers_file, sets, modes=("hybrid", "bm25-file"), file_level=True)
    # the whole-file ranker gets its own rows, not a "delta" against ours
    rows = summarize(results)
    if rankers_chunk:
        chunk_results = run(rankers_chunk, sets, modes=("naive-fusion",))
        rows += summarize(chunk_results)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    if args.markdown:
        print(markdown(rows, compare([])))
        return 0
    for row in rows:
        print(
            f"{row['set']:5} {row['config']:13} {row['mode']:12} {row['group']:20} n={row['n']:<4}"
            f" R@1 {row['recall@1']:.3f} R@5 {row['recall@5']:.3f} R@10 {row['recall@10']:.3f}"
            f" MRR {row['mrr@10']:.3f} nDCG {row['ndcg@10']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
