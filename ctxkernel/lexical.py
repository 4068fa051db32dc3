"""LexicalIndex: BM25 (bm25s) over one corpus's chunks, in three fields that rank
different things well:

- ``body``: the chunk text — what code and prose say;
- ``head``: symbol, title, defined names, file name — what a chunk *is*, so a query
  naming a symbol or a section finds the definition rather than the many uses;
- ``file``: whole files (path + all their chunks) — how-to questions are often answered
  by a file as a whole (a tutorial, an example); its best chunk stands for it.

Each field is ranked separately and the Searcher fuses the rankings. Built from the
corpus cache at the end of every index run, written to a temp dir and swapped in. A
search over several corpora scores them with one IDF over all of them
(``shared_idf_weights``), so their scores compare.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from .boilerplate import clean_title, without_license
from .tokenize import tokenize

FIELDS = ("body", "head", "file")
BM25_PARAMS = {"body": (1.2, 0.75), "head": (1.2, 0.3), "file": (1.2, 0.75)}


def idf(docs: int, holding: int) -> float:
    """BM25's (Lucene's) inverse document frequency, as bm25s computes it."""
    return math.log(1 + (docs - holding + 0.5) / (holding + 0.5))


def shared_idf_weights(
    stats: dict[str, dict[str, tuple[int, dict[str, int]]]],
) -> dict[str, dict[str, dict[str, float]]]:
    """Per corpus, field and token: the IDF over all the corpora together divided by the
    corpus's own, so that the corpora's BM25 scores are those of one index over all of
    them (up to each corpus's own average length) and can be merged by score.

    ``stats`` is corpus -> field -> ``doc_stats``."""
    totals: dict[str, tuple[int, dict[str, int]]] = {}
    for fields in stats.values():
        for field, (docs, df) in fields.items():
            n, merged = totals.get(field, (0, {}))
            for t, d in df.items():
                merged[t] = merged.get(t, 0) + d
            totals[field] = (n + docs, merged)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for corpus, fields in stats.items():
        out[corpus] = {}
        for field, (docs, df) in fields.items():
            all_docs, all_df = totals[field]
            out[corpus][field] = {
                t: idf(all_docs, all_df[t]) / idf(docs, d) for t, d in df.items() if d
            }
    return out


def head_text(path: str, symbol: str, title: str, defines: str) -> str:
    # the file name but not its folders: folder names repeat across many files and
    # would make every chunk under them look like a heading match
    return f"{symbol} {title} {defines} {PurePosixPath(path).stem}"


@dataclass
class LexicalIndex:
    rows: Any  # np.ndarray[int64]: chunk position -> cache row
    file_of: Any  # np.ndarray[int64]: chunk position -> file number
    models: dict[str, Any]  # field -> bm25s.BM25 (absent when the corpus is empty)

    @staticmethod
    def build(directory: Path, chunks: Iterable[tuple[int, str, str, str, str, str]]) -> int:
        """Index ``(row, path, symbol, title, defines, text)`` tuples into ``directory``."""
        import bm25s
        import numpy as np

        rows: list[int] = []
        file_of: list[int] = []
        body: list[list[str]] = []
        head: list[list[str]] = []
        files: dict[str, int] = {}
        file_docs: list[list[str]] = []
        for row, path, symbol, title, defines, text in chunks:
            number = files.get(path)
            if number is None:
                number = files[path] = len(file_docs)
                file_docs.append(tokenize(path.replace("/", " ")))
            body_tokens = tokenize(without_license(text or ""))
            rows.append(int(row))
            file_of.append(number)
            body.append(body_tokens or ["<empty>"])
            title = clean_title(title, text or "", path)
            head.append(tokenize(head_text(path, symbol, title, defines)) or ["<empty>"])
            file_docs[number].extend(body_tokens)
        tmp = directory.parent / f"{directory.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, docs in (("body", body), ("head", head), ("file", file_docs)):
            if docs:
                k1, b = BM25_PARAMS[name]
                model = bm25s.BM25(k1=k1, b=b)
                model.index(docs, show_progress=False)
                model.save(str(tmp / name), show_progress=False)
        np.save(tmp / "rows.npy", np.asarray(rows, dtype=np.int64))
        np.save(tmp / "file_of.npy", np.asarray(file_of, dtype=np.int64))
        (tmp / "meta.json").write_text(
            json.dumps({"fields": list(FIELDS), "chunks": len(rows), "files": len(files)})
        )
        old = directory.parent / f"{directory.name}.old-{os.getpid()}"
        if directory.exists():
            os.replace(directory, old)
        os.replace(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
        return len(rows)

    @staticmethod
    def load(directory: Path) -> LexicalIndex | None:
        import bm25s
        import numpy as np

        if not (directory / "meta.json").is_file():
            return None
        rows = np.load(directory / "rows.npy")
        file_of = np.load(directory / "file_of.npy")
        models = {}
        if len(rows):
            for name in FIELDS:
                models[name] = bm25s.BM25.load(
                    str(directory / name), show_progress=False, mmap=False
                )
        return LexicalIndex(rows, file_of, models)

    def doc_stats(self, field: str, tokens: list[str]) -> tuple[int, dict[str, int]]:
        """(documents in ``field``, {query token: documents holding it}): what an IDF over
        several corpora is computed from."""
        model = self.models.get(field)
        if model is None:
            return 0, {}
        indptr = model.scores["indptr"]
        df = {}
        for t in set(tokens):
            tid = model.vocab_dict.get(t)
            if tid is not None:
                df[t] = int(indptr[tid + 1] - indptr[tid])
        return int(model.scores["num_docs"]), df

    def scores(self, field: str, tokens: list[str], weights: dict[str, float] | None = None) -> Any:
        """BM25 scores of ``field`` for every chunk position (file scores spread to their
        chunks); ``weights`` scales each token's part (an IDF of several corpora over this
        corpus's own)."""
        import numpy as np

        model = self.models.get(field)
        if model is None:
            return np.zeros(len(self.rows), dtype=np.float32)
        known = [t for t in tokens if t in model.vocab_dict]
        if not known:
            n = len(self.rows) if field != "file" else int(self.file_of.max(initial=-1)) + 1
            scores = np.zeros(n, dtype=np.float32)
        elif weights is None:
            scores = np.asarray(model.get_scores(known), dtype=np.float32)
        else:
            data, indices, indptr = (model.scores[k] for k in ("data", "indices", "indptr"))
            scores = np.zeros(int(model.scores["num_docs"]), dtype=np.float32)
            for t in known:
                tid = model.vocab_dict[t]
                lo, hi = indptr[tid], indptr[tid + 1]
                np.add.at(scores, indices[lo:hi], data[lo:hi] * np.float32(weights.get(t, 1.0)))
        return scores[self.file_of] if field == "file" else scores

    def rank(self, tokens: list[str], depth: int, allowed: Any = None) -> dict[str, list[int]]:
        """Cache rows ranked by each field; ``allowed`` is a boolean mask over chunk positions."""
        return {
            field: [row for row, _ in ranked]
            for field, ranked in self.rank_scored(tokens, depth, allowed).items()
        }

    def rank_scored(
        self,
        tokens: list[str],
        depth: int,
        allowed: Any = None,
        weights: dict[str, dict[str, float]] | None = None,
    ) -> dict[str, list[tuple[int, float]]]:
        """(cache row, BM25 score) ranked by each field, best first; ``allowed`` is a
        boolean mask over chunk positions, ``weights`` per field and token scale the
        token's part of the score. The scores are what rankings of several corpora are
        merged by (see ``Searcher``).

        The ``file`` ranking lists each matching file once, through its best chunk by body
        score, with the file's score.
        """
        import numpy as np

        out: dict[str, list[tuple[int, float]]] = {}
        if not len(self.rows):
            return {field: [] for field in FIELDS}
        weights = weights or {}
        body = self.scores("body", tokens, weights.get("body"))
        for field in FIELDS:
            scores = body if field == "body" else self.scores(field, tokens, weights.get(field))
            if allowed is not None:
                scores = np.where(allowed, scores, 0.0)
            if field == "file":
                # one entry per file: its best chunk by body score, in file-score order
                key = scores + 1e-6 * body / (float(body.max(initial=0.0)) + 1.0)
                order = np.argsort(-key, kind="stable")
                seen: set[int] = set()
                picked: list[tuple[int, float]] = []
                for pos in order:
                    if key[pos] <= 0 or len(picked) >= depth:
                        break
                    f = int(self.file_of[pos])
                    if f not in seen:
                        seen.add(f)
                        picked.append((int(self.rows[pos]), float(scores[pos])))
                out[field] = picked
                continue
            n = min(depth, int((scores > 0).sum()))
            if n == 0:
                out[field] = []
                continue
            top = np.argpartition(-scores, n - 1)[:n]
            top = top[np.argsort(-scores[top], kind="stable")]
            out[field] = [(int(self.rows[i]), float(scores[i])) for i in top]
        return out
