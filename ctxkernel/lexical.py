"""LexicalIndex: BM25 over one corpus's chunks, in three fields that rank different things
well:

- ``body``: the chunk text — what code and prose say;
- ``head``: symbol, title, defined names, file name — what a chunk *is*, so a query
  naming a symbol or a section finds the definition rather than the many uses;
- ``file``: whole files (path + all their chunks) — how-to questions are often answered
  by a file as a whole (a tutorial, an example); its best chunk stands for it.

Each field is ranked separately and the Searcher fuses the rankings.

Storage. Each chunk's term counts (body and head) and each file's are kept in the corpus
cache's SQLite (``chunk_terms``, ``file_terms``, ids in ``terms``), written in the same
transaction as the chunk, so an index run tokenizes only the files it changes. At the end
of a run the BM25 weights are computed from those counts with numpy (Lucene's BM25, as
bm25s computes it) and written term-major to ``bm25/`` (one ``.npy`` per array, swapped
in whole); a search maps them read-only and needs neither bm25s nor scipy.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from .tokenize import tokenize

if TYPE_CHECKING:
    from .corpus import Chunk

FIELDS = ("body", "head", "file")
BM25_PARAMS = {"body": (1.2, 0.75), "head": (1.2, 0.3), "file": (1.2, 0.75)}
FORMAT = 2  # 1: bm25s models (before term counts were kept per chunk)

SCHEMA = """
CREATE TABLE IF NOT EXISTS terms(id INTEGER PRIMARY KEY, term TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS chunk_terms(row INTEGER PRIMARY KEY, body BLOB, head BLOB);
CREATE TABLE IF NOT EXISTS file_terms(path TEXT PRIMARY KEY, terms BLOB);
"""


def head_text(path: str, symbol: str, title: str, defines: str) -> str:
    # the file name but not its folders: folder names repeat across many files and
    # would make every chunk under them look like a heading match
    return f"{symbol} {title} {defines} {PurePosixPath(path).stem}"


def path_text(path: str) -> str:
    return path.replace("/", " ")


@dataclass
class ChunkTerms:
    """One chunk's term counts, by field."""

    body: Counter[str]
    head: Counter[str]


def chunk_terms(path: str, symbol: str, title: str, defines: str, text: str) -> ChunkTerms:
    return ChunkTerms(
        Counter(tokenize(text or "")), Counter(tokenize(head_text(path, symbol, title, defines)))
    )


def terms_of(chunk: Chunk) -> ChunkTerms:
    return chunk_terms(chunk.path, chunk.symbol, chunk.title, " ".join(chunk.defines), chunk.text)


class TermIds:
    """Term -> id for one corpus (the ``terms`` table), memoised for the run."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.known: dict[str, int] = {}
        self._next: int | None = None

    def lookup(self, terms: Iterable[str]) -> dict[str, int]:
        """Ids of the terms the corpus has (unknown ones are left out)."""
        wanted = [t for t in dict.fromkeys(terms) if t not in self.known]
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            q = f"SELECT term, id FROM terms WHERE term IN ({','.join('?' * len(part))})"
            self.known.update((t, int(i)) for t, i in self.db.execute(q, part))
        return {t: self.known[t] for t in terms if t in self.known}

    def assign(self, terms: Iterable[str]) -> dict[str, int]:
        """Ids for every term, new ones added (call inside the writer's transaction)."""
        terms = list(dict.fromkeys(terms))
        found = self.lookup(terms)
        new = [t for t in terms if t not in found]
        if new:
            if self._next is None:
                self._next = (
                    int(self.db.execute("SELECT COALESCE(MAX(id), -1) FROM terms").fetchone()[0])
                    + 1
                )
            ids = range(self._next, self._next + len(new))
            self.db.executemany(
                "INSERT INTO terms(id, term) VALUES(?, ?)", zip(ids, new, strict=True)
            )
            self._next += len(new)
            for t, i in zip(new, ids, strict=True):
                self.known[t] = found[t] = i
        return found

    def forget(self) -> None:
        """After a rolled-back transaction: ids handed out in it are not in the table."""
        self.known.clear()
        self._next = None


def _blob(counts: Counter[str], ids: dict[str, int]) -> bytes:
    import numpy as np

    if not counts:
        return b""
    pairs = np.empty((len(counts), 2), dtype=np.int32)
    pairs[:, 0] = [ids[t] for t in counts]
    pairs[:, 1] = list(counts.values())
    return pairs.tobytes()


def write_chunk_terms(
    db: sqlite3.Connection, term_ids: TermIds, rows: Sequence[int], terms: Sequence[ChunkTerms]
) -> None:
    """Store the term counts of freshly inserted chunk rows."""
    ids = term_ids.assign(t for ct in terms for field in (ct.body, ct.head) for t in field)
    db.executemany(
        "INSERT OR REPLACE INTO chunk_terms(row, body, head) VALUES(?,?,?)",
        [(r, _blob(ct.body, ids), _blob(ct.head, ids)) for r, ct in zip(rows, terms, strict=True)],
    )


def write_file_terms(
    db: sqlite3.Connection, term_ids: TermIds, path: str, chunks: Sequence[ChunkTerms]
) -> None:
    """A file's counts for the ``file`` field: its path words and all its chunks' bodies."""
    total: Counter[str] = Counter(tokenize(path_text(path)))
    for ct in chunks:
        total.update(ct.body)
    ids = term_ids.assign(total)
    db.execute(
        "INSERT OR REPLACE INTO file_terms(path, terms) VALUES(?, ?)", (path, _blob(total, ids))
    )


def delete_rows(db: sqlite3.Connection, rows: Sequence[int]) -> None:
    db.executemany("DELETE FROM chunk_terms WHERE row=?", [(r,) for r in rows])


def delete_file(db: sqlite3.Connection, path: str) -> None:
    db.execute("DELETE FROM file_terms WHERE path=?", (path,))


def backfill(db: sqlite3.Connection, term_ids: TermIds) -> int:
    """Term counts for chunks stored without them (a store made before they were kept,
    or rebuilt from a chroma server); returns how many chunks were tokenized."""
    missing = db.execute(
        "SELECT c.row, c.path, c.symbol, c.title, c.defines, c.text FROM chunks c "
        "LEFT JOIN chunk_terms t ON t.row = c.row WHERE t.row IS NULL ORDER BY c.row"
    ).fetchall()
    no_file = [
        r[0]
        for r in db.execute(
            "SELECT DISTINCT c.path FROM chunks c LEFT JOIN file_terms f ON f.path = c.path "
            "WHERE f.path IS NULL"
        )
    ]
    if not missing and not no_file:
        return 0
    with db:
        if missing:
            terms = [
                chunk_terms(p, s or "", t or "", d or "", x or "") for _, p, s, t, d, x in missing
            ]
            write_chunk_terms(db, term_ids, [r[0] for r in missing], terms)
        for path in no_file:
            bodies = [
                ChunkTerms(Counter(tokenize(text or "")), Counter())
                for (text,) in db.execute("SELECT text FROM chunks WHERE path=?", (path,))
            ]
            write_file_terms(db, term_ids, path, bodies)
    return len(missing)


def _pairs(blob: bytes | None) -> Any:
    import numpy as np

    return np.frombuffer(blob or b"", dtype=np.int32).reshape(-1, 2)


def _field_arrays(
    doc_pairs: Sequence[Any], n_terms: int, k1: float, b: float
) -> tuple[Any, Any, Any]:
    """BM25 weights of one field, term-major: (indptr, docs, weights).

    Lucene's variant (bm25s's default): idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
    tf part = tf / (tf + k1 * (1 - b + b * dl / avgdl)).
    """
    import numpy as np

    n_docs = len(doc_pairs)
    sizes = np.fromiter((len(p) for p in doc_pairs), dtype=np.int64, count=n_docs)
    if sizes.sum() == 0:
        return np.zeros(n_terms + 1, dtype=np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    pairs = np.concatenate([p for p in doc_pairs if len(p)])
    term = pairs[:, 0].astype(np.int64)
    tf = pairs[:, 1].astype(np.float32)
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), sizes)
    doc_len = np.bincount(doc, weights=tf, minlength=n_docs).astype(np.float32)
    avg = float(doc_len.mean()) or 1.0
    df = np.bincount(term, minlength=n_terms).astype(np.float32)
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    weights = idf[term] * tf / (tf + k1 * (1 - b + b * doc_len[doc] / avg))
    order = np.argsort(term, kind="stable")
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(term, minlength=n_terms), out=indptr[1:])
    return indptr, doc[order], weights[order].astype(np.float32)


@dataclass
class LexicalIndex:
    rows: Any  # np.ndarray[int64]: chunk position -> cache row
    file_of: Any  # np.ndarray[int64]: chunk position -> file number
    fields: dict[str, tuple[Any, Any, Any]]  # field -> (indptr, docs, weights), term-major
    n_docs: dict[str, int]
    term_ids: Callable[[Sequence[str]], dict[str, int]]

    @staticmethod
    def build(directory: Path, db: sqlite3.Connection, term_ids: TermIds) -> int:
        """Compute the index from the stored term counts into ``directory``; returns the
        number of chunks."""
        import numpy as np

        backfill(db, term_ids)
        n_terms = int(db.execute("SELECT COALESCE(MAX(id), -1) FROM terms").fetchone()[0]) + 1
        rows: list[int] = []
        file_of: list[int] = []
        files: dict[str, int] = {}
        body: list[Any] = []
        head: list[Any] = []
        for row, path, b_blob, h_blob in db.execute(
            "SELECT c.row, c.path, t.body, t.head FROM chunks c "
            "JOIN chunk_terms t ON t.row = c.row ORDER BY c.row"
        ):
            number = files.setdefault(path, len(files))
            rows.append(int(row))
            file_of.append(number)
            body.append(_pairs(b_blob))
            head.append(_pairs(h_blob))
        file_docs: list[Any] = [_pairs(b"")] * len(files)
        for path, blob in db.execute("SELECT path, terms FROM file_terms"):
            found = files.get(path)
            if found is not None:
                file_docs[found] = _pairs(blob)
        tmp = directory.parent / f"{directory.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, docs in (("body", body), ("head", head), ("file", file_docs)):
            k1, b = BM25_PARAMS[name]
            indptr, doc, weight = _field_arrays(docs, n_terms, k1, b)
            np.save(tmp / f"{name}.indptr.npy", indptr)
            np.save(tmp / f"{name}.docs.npy", doc)
            np.save(tmp / f"{name}.weights.npy", weight)
        np.save(tmp / "rows.npy", np.asarray(rows, dtype=np.int64))
        np.save(tmp / "file_of.npy", np.asarray(file_of, dtype=np.int64))
        meta = {
            "format": FORMAT,
            "fields": list(FIELDS),
            "chunks": len(rows),
            "files": len(files),
            "terms": n_terms,
        }
        (tmp / "meta.json").write_text(json.dumps(meta))
        old = directory.parent / f"{directory.name}.old-{os.getpid()}"
        if directory.exists():
            os.replace(directory, old)
        os.replace(tmp, directory)
        shutil.rmtree(old, ignore_errors=True)
        return len(rows)

    @staticmethod
    def load(
        directory: Path, term_ids: Callable[[Sequence[str]], dict[str, int]]
    ) -> LexicalIndex | None:
        """The index in ``directory``, or None when there is none in this format."""
        import numpy as np

        try:
            meta = json.loads((directory / "meta.json").read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if meta.get("format") != FORMAT:
            return None
        fields = {
            name: tuple(
                np.load(directory / f"{name}.{part}.npy", mmap_mode="r")
                for part in ("indptr", "docs", "weights")
            )
            for name in FIELDS
        }
        n_docs = {
            "body": int(meta["chunks"]),
            "head": int(meta["chunks"]),
            "file": int(meta["files"]),
        }
        return LexicalIndex(
            np.load(directory / "rows.npy"),
            np.load(directory / "file_of.npy"),
            fields,  # type: ignore[arg-type]
            n_docs,
            term_ids,
        )

    def scores(self, field: str, tokens: list[str]) -> Any:
        """BM25 scores of ``field`` for every chunk position (file scores spread to their
        chunks); a token repeated in the query counts each time, as in bm25s."""
        import numpy as np

        indptr, docs, weights = self.fields[field]
        scores = np.zeros(self.n_docs[field], dtype=np.float32)
        ids = self.term_ids(tokens)
        for t in tokens:
            i = ids.get(t)
            if i is None or i + 1 >= len(indptr):
                continue  # unknown, or added after this index was built
            lo, hi = int(indptr[i]), int(indptr[i + 1])
            if hi > lo:
                scores[docs[lo:hi]] += weights[lo:hi]
        return scores[self.file_of] if field == "file" else scores

    def rank(self, tokens: list[str], depth: int, allowed: Any = None) -> dict[str, list[int]]:
        """Cache rows ranked by each field; ``allowed`` is a boolean mask over chunk positions.

        The ``file`` ranking lists each matching file once, through its best chunk by body score.
        """
        import numpy as np

        out: dict[str, list[int]] = {}
        if not len(self.rows):
            return {field: [] for field in FIELDS}
        body = self.scores("body", tokens)
        for field in FIELDS:
            scores = body if field == "body" else self.scores(field, tokens)
            if allowed is not None:
                scores = np.where(allowed, scores, 0.0)
            if field == "file":
                # one entry per file: its best chunk by body score, in file-score order
                key = scores + 1e-6 * body / (float(body.max(initial=0.0)) + 1.0)
                order = np.argsort(-key, kind="stable")
                seen: set[int] = set()
                picked: list[int] = []
                for pos in order:
                    if key[pos] <= 0 or len(picked) >= depth:
                        break
                    f = int(self.file_of[pos])
                    if f not in seen:
                        seen.add(f)
                        picked.append(int(self.rows[pos]))
                out[field] = picked
                continue
            n = min(depth, int((scores > 0).sum()))
            if n == 0:
                out[field] = []
                continue
            top = np.argpartition(-scores, n - 1)[:n]
            top = top[np.argsort(-scores[top], kind="stable")]
            out[field] = [int(self.rows[i]) for i in top]
        return out
