"""LexicalIndex: BM25 over one corpus's chunks, in three fields that rank different things
well:

- ``body``: the chunk text — what code and prose say;
- ``head``: symbol, title, defined names, file name — what a chunk *is*, so a query
  naming a symbol or a section finds the definition rather than the many uses;
- ``file``: whole files (path + all their chunks) — how-to questions are often answered
  by a file as a whole (a tutorial, an example); its best chunk stands for it.

Each field is ranked separately and the Searcher fuses the rankings. A search over
several corpora scores them with one IDF over all of them (``shared_idf_weights``), so
their scores compare.

Storage. Each chunk's term counts (body and head) and each file's are kept in the corpus
cache's SQLite (``chunk_terms``, ``file_terms``, ids in ``terms``), written in the same
transaction as the chunk, so an index run tokenizes only the files it changes. At the end
of a run those counts are laid out term-major with numpy in ``bm25/`` (one ``.npy`` per
array, swapped in whole; updated in place when few files changed); a search maps them
read-only and computes the BM25 weights of its few terms (Lucene's BM25, as bm25s
computes it), needing neither bm25s nor scipy.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from .boilerplate import clean_title, without_license
from .tokenize import tokenize

if TYPE_CHECKING:
    from .corpus import Chunk

FIELDS = ("body", "head", "file")
BM25_PARAMS = {"body": (1.2, 0.75), "head": (1.2, 0.3), "file": (1.2, 0.75)}
FORMAT = 3  # 1: bm25s models; 2: precomputed weights (no incremental update)
# a file's ``file`` entry is the chunk of it whose body matches the query best, so a
# question about a file's later section is not answered by its opening (False: the
# first chunk, what a lost float32 tiebreak gave before)
FILE_BY_BODY = True

SCHEMA = """
CREATE TABLE IF NOT EXISTS terms(id INTEGER PRIMARY KEY, term TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS chunk_terms(row INTEGER PRIMARY KEY, body BLOB, head BLOB);
CREATE TABLE IF NOT EXISTS file_terms(path TEXT PRIMARY KEY, terms BLOB);
"""


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


def path_text(path: str) -> str:
    return path.replace("/", " ")


@dataclass
class ChunkTerms:
    """One chunk's term counts, by field."""

    body: Counter[str]
    head: Counter[str]


def chunk_terms(path: str, symbol: str, title: str, defines: str, text: str) -> ChunkTerms:
    """A license header is no search text: left out of the body, and out of the head
    through a title that is not a license line (``boilerplate.py``)."""
    title = clean_title(title, text or "", path)
    return ChunkTerms(
        Counter(tokenize(without_license(text or ""))),
        Counter(tokenize(head_text(path, symbol, title, defines))),
    )


def terms_of(chunk: Chunk) -> ChunkTerms:
    return chunk_terms(chunk.path, chunk.symbol, chunk.title, " ".join(chunk.defines), chunk.text)


class TermIds:
    """Term -> id for one corpus (the ``terms`` table), memoised for the run.

    ``absent_too`` remembers the terms the table lacks as well, for a reader bound to one
    build of the index: a term added later has an id past that build's terms, which its
    scores leave out anyway, and a search asks for the same query words a few times per
    field and corpus."""

    def __init__(self, db: sqlite3.Connection, *, absent_too: bool = False) -> None:
        self.db = db
        self.known: dict[str, int] = {}
        self._next: int | None = None
        self._absent: set[str] | None = set() if absent_too else None

    def lookup(self, terms: Iterable[str]) -> dict[str, int]:
        """Ids of the terms the corpus has (unknown ones are left out)."""
        absent = self._absent
        wanted = [
            t
            for t in dict.fromkeys(terms)
            if t not in self.known and (absent is None or t not in absent)
        ]
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            q = f"SELECT term, id FROM terms WHERE term IN ({','.join('?' * len(part))})"
            self.known.update((t, int(i)) for t, i in self.db.execute(q, part))
        if absent is not None:
            absent.update(t for t in wanted if t not in self.known)
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
                ChunkTerms(Counter(tokenize(without_license(text or ""))), Counter())
                for (text,) in db.execute("SELECT text FROM chunks WHERE path=?", (path,))
            ]
            write_file_terms(db, term_ids, path, bodies)
    return len(missing)


def _pairs(blob: bytes | None) -> Any:
    import numpy as np

    return np.frombuffer(blob or b"", dtype=np.int32).reshape(-1, 2)


@dataclass
class _Field:
    """One field, term-major: the docs holding term t are ``docs[indptr[t]:indptr[t+1]]``
    with their term counts ``tf``; ``length`` is each doc's token count. BM25 weights are
    computed at query time for the few terms a query names, so an update only moves
    entries and never recomputes weights for the whole corpus."""

    indptr: Any
    docs: Any
    tf: Any
    length: Any

    @staticmethod
    def from_docs(doc_pairs: Sequence[Any], n_terms: int) -> _Field:
        import numpy as np

        sizes = np.fromiter((len(p) for p in doc_pairs), dtype=np.int64, count=len(doc_pairs))
        if not sizes.sum():
            return _Field(
                np.zeros(n_terms + 1, dtype=np.int64),
                np.zeros(0, np.int32),
                np.zeros(0, np.float32),
                np.zeros(len(doc_pairs), np.float32),
            )
        pairs = np.concatenate([p for p in doc_pairs if len(p)])
        term = pairs[:, 0]
        tf = pairs[:, 1].astype(np.float32)
        doc = np.repeat(np.arange(len(doc_pairs), dtype=np.int32), sizes)
        length = np.bincount(doc, weights=tf, minlength=len(doc_pairs)).astype(np.float32)
        order = np.argsort(term, kind="stable")
        return _Field(_indptr(term, n_terms), doc[order], tf[order], length)

    def updated(self, keep: Any, new_docs: Sequence[Any], n_terms: int) -> _Field:
        """Drop the docs ``keep`` marks False (the others are renumbered in order) and
        append ``new_docs``: linear moves of the arrays, no sort of the whole field."""
        import numpy as np

        renumber = np.cumsum(keep, dtype=np.int64) - 1
        old_terms = len(self.indptr) - 1
        term = np.repeat(np.arange(old_terms, dtype=np.int32), np.diff(self.indptr))
        kept = keep[self.docs]
        term, docs, tf = term[kept], renumber[self.docs[kept]].astype(np.int32), self.tf[kept]
        add = _Field.from_docs(new_docs, n_terms)
        add_term = np.repeat(np.arange(n_terms, dtype=np.int32), np.diff(add.indptr))
        at = np.searchsorted(term, add_term, side="right")
        base = int(keep.sum())
        return _Field(
            _indptr(np.insert(term, at, add_term), n_terms),
            np.insert(docs, at, add.docs + base),
            np.insert(tf, at, add.tf),
            np.concatenate([self.length[keep], add.length]),
        )

    def save(self, folder: Path, name: str) -> None:
        import numpy as np

        for part in ("indptr", "docs", "tf", "length"):
            np.save(folder / f"{name}.{part}.npy", getattr(self, part))

    @staticmethod
    def load(folder: Path, name: str, mmap: bool) -> _Field:
        import numpy as np

        mode: Any = "r" if mmap else None
        arrays = [
            np.load(folder / f"{name}.{part}.npy", mmap_mode=mode)
            for part in ("indptr", "docs", "tf", "length")
        ]
        # plain arrays over the mapped pages: np.memmap's subclass hooks run on every
        # slice and gather, a third of the time of a query's few terms
        return _Field(*(a.view(np.ndarray) if mmap else a for a in arrays))


def _indptr(term: Any, n_terms: int) -> Any:
    import numpy as np

    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(term, minlength=n_terms), out=indptr[1:])
    return indptr


@dataclass
class LexicalIndex:
    rows: Any  # np.ndarray[int64]: chunk position -> cache row
    file_of: Any  # np.ndarray[int64]: chunk position -> file number
    fields: dict[str, _Field]
    term_ids: Callable[[Sequence[str]], dict[str, int]]
    avg: dict[str, float]  # mean doc length per field
    _norms: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)  # ``_norm``
    # field -> (query key, scores) of the last ``scores`` call
    _last_scores: dict[str, tuple[Any, Any]] = dataclasses.field(default_factory=dict, repr=False)
    _n_files: int | None = dataclasses.field(default=None, repr=False)
    _openings: Any = dataclasses.field(default=None, repr=False)  # file -> its first position

    @staticmethod
    def build(directory: Path, db: sqlite3.Connection, term_ids: TermIds) -> int:
        """Bring the index in ``directory`` up to date with the stored term counts; returns
        the number of chunks. Only the chunks and files that changed since the last
        build are read (a whole build when there is none, or when most changed)."""
        import numpy as np

        backfilled = backfill(db, term_ids)
        n_terms = int(db.execute("SELECT COALESCE(MAX(id), -1) FROM terms").fetchone()[0]) + 1
        current = db.execute("SELECT row, path FROM chunks ORDER BY row").fetchall()
        path_of = {int(r): p for r, p in current}
        old = None if backfilled else _Previous.load(directory)
        moved = 0
        if old is not None:
            before = set(old.rows)
            moved = len(before - path_of.keys()) + len(path_of.keys() - before)
        if old is None or moved > max(1000, len(path_of) // 3):
            rows, paths, fields = _whole(db, current, n_terms)
        else:
            rows, paths, fields = _update(db, old, path_of, n_terms)
        number = {p: i for i, p in enumerate(paths)}
        file_of = np.fromiter((number[path_of[int(r)]] for r in rows), np.int64, count=len(rows))
        tmp = directory.parent / f"{directory.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name, f in fields.items():
            f.save(tmp, name)
        np.save(tmp / "rows.npy", np.asarray(rows, dtype=np.int64))
        np.save(tmp / "file_of.npy", file_of)
        (tmp / "files.json").write_text(json.dumps(paths))
        meta = {
            "format": FORMAT,
            "fields": list(FIELDS),
            "chunks": len(rows),
            "files": len(paths),
            "terms": n_terms,
            "avg": {
                name: float(f.length.mean()) if len(f.length) else 1.0 for name, f in fields.items()
            },
        }
        (tmp / "meta.json").write_text(json.dumps(meta))
        gone = directory.parent / f"{directory.name}.old-{os.getpid()}"
        if directory.exists():
            os.replace(directory, gone)
        os.replace(tmp, directory)
        shutil.rmtree(gone, ignore_errors=True)
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
        return LexicalIndex(
            np.load(directory / "rows.npy"),
            np.load(directory / "file_of.npy"),
            {name: _Field.load(directory, name, mmap=True) for name in FIELDS},
            term_ids,
            {name: float(v) for name, v in meta["avg"].items()},
        )

    def doc_stats(self, field: str, tokens: list[str]) -> tuple[int, dict[str, int]]:
        """(documents in ``field``, {query token: documents holding it}): what an IDF over
        several corpora is computed from."""
        f = self.fields[field]
        ids = self.term_ids(sorted(set(tokens)))
        df: dict[str, int] = {}
        for t, i in ids.items():
            if i + 1 < len(f.indptr):
                held = int(f.indptr[i + 1] - f.indptr[i])
                if held:
                    df[t] = held
        return len(f.length), df

    def scores(self, field: str, tokens: list[str], weights: dict[str, float] | None = None) -> Any:
        """BM25 scores of ``field`` for every chunk position (file scores spread to their
        chunks); a token repeated in the query counts each time, as in bm25s; ``weights``
        scales each token's part (an IDF of several corpora over this corpus's own).

        Lucene's variant (bm25s's default): idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
        tf part = tf / (tf + k1 * (1 - b + b * dl / avgdl)).
        """
        import numpy as np

        # one search asks for the same field's scores more than once (the rankings, the
        # raise sites' pool, the path ranker's best chunk of a file): the last answer
        # per field is kept, read-only
        key = (tuple(tokens), tuple(sorted(weights.items())) if weights else ())
        last = self._last_scores.get(field)
        if last is not None and last[0] == key:
            return last[1]
        f = self.fields[field]
        n = len(f.length)
        scores = np.zeros(n, dtype=np.float32)
        ids = self.term_ids(tokens)
        norm = self._norm(field)
        for t in tokens:
            i = ids.get(t)
            if i is None or i + 1 >= len(f.indptr):
                continue  # unknown, or added after this index was built
            lo, hi = int(f.indptr[i]), int(f.indptr[i + 1])
            if hi == lo:
                continue
            docs = f.docs[lo:hi]
            tf = f.tf[lo:hi]
            scale = weights.get(t, 1.0) if weights else 1.0
            w = np.float32(idf(n, hi - lo) * scale)
            scores[docs] += w * tf / (tf + norm[docs])
        out = scores[self.file_of] if field == "file" else scores
        out.flags.writeable = False
        self._last_scores[field] = (key, out)
        return out

    def _norm(self, field: str) -> Any:
        """``k1 * (1 - b + b * length / avgdl)`` of every doc of ``field``, computed once
        (the same float32 operations per doc as computing it per query)."""
        cached = self._norms.get(field)
        if cached is None:
            f = self.fields[field]
            k1, b = BM25_PARAMS[field]
            avg = self.avg[field] or 1.0
            cached = self._norms[field] = k1 * (1 - b + b * f.length / avg)
        return cached

    def _file_floor(self, scores: Any, matched: Any, depth: int) -> float:
        """The ``depth``-th best file score among the files of the ``matched`` chunk
        positions (``scores`` holds each chunk's file score), 0.0 when there are no more
        files than that: a chunk scoring below it belongs to a file that cannot lead."""
        import numpy as np

        if self._n_files is None:
            self._n_files = int(self.file_of.max(initial=-1)) + 1
        per_file = np.zeros(self._n_files, dtype=scores.dtype)
        per_file[self.file_of[matched]] = scores[matched]  # a file's chunks share its score
        held = per_file[per_file > 0]
        if len(held) <= depth:
            return 0.0
        return float(np.partition(held, len(held) - depth)[len(held) - depth])

    def _opening_of(self) -> Any:
        """Each file's first chunk position (its opening), computed once."""
        import numpy as np

        if self._openings is None:
            files, first = np.unique(self.file_of, return_index=True)
            self._openings = np.zeros(int(files.max(initial=-1)) + 1, dtype=np.int64)
            self._openings[files] = first
        return self._openings

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
        opening: float = 0.0,
    ) -> dict[str, list[tuple[int, float]]]:
        """(cache row, BM25 score) ranked by each field, best first; ``allowed`` is a
        boolean mask over chunk positions, ``weights`` per field and token scale the
        token's part of the score. The scores are what rankings of several corpora are
        merged by (see ``Searcher``).

        The ``file`` ranking lists each matching file once, through its best chunk by body
        score, with the file's score; with ``opening`` (a question asking for a whole
        file), through its first chunk unless the best one's body score is at least
        ``opening`` times the first's.
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
                matched = np.flatnonzero(scores > 0)
                key = scores[matched]
                if FILE_BY_BODY:
                    # the body score breaks the tie between a file's chunks in float64:
                    # added to the float32 file score, it was below that score's
                    # precision and lost, and the file's first chunk stood in for it
                    # whatever the question asked
                    best_body = float(body.max(initial=0.0)) + 1.0
                    key = key.astype(np.float64) + 1e-6 * body[matched] / best_body
                # most chunks of a corpus match some word of a long question: only the
                # chunks of the ``depth`` best files can lead, so only those are sorted
                # (the same order: a file's key is at least its file score)
                near = key >= self._file_floor(scores, matched, depth)
                if not near.all():
                    matched, key = matched[near], key[near]
                order = matched[np.argsort(-key, kind="stable")]
                # each file's first position in that order, in order
                _, first = np.unique(self.file_of[order], return_index=True)
                best = order[np.sort(first)[:depth]]
                if opening > 0:
                    # a file asked for as a whole: its opening (what the file is) stands
                    # in, unless a later chunk matches the question ``opening`` times
                    # better (a question that describes that part)
                    opens = self._opening_of()[self.file_of[best]]
                    use = (scores[opens] > 0) & (body[best] < opening * body[opens])
                    best = np.where(use, opens, best)
                out[field] = list(zip(self.rows[best].tolist(), scores[best].tolist(), strict=True))
                continue
            n = min(depth, int((scores > 0).sum()))
            if n == 0:
                out[field] = []
                continue
            top = np.argpartition(-scores, n - 1)[:n]
            top = top[np.argsort(-scores[top], kind="stable")]
            out[field] = list(zip(self.rows[top].tolist(), scores[top].tolist(), strict=True))
        return out


@dataclass
class _Previous:
    """The last build, read back to update it."""

    rows: list[int]
    file_of: list[int]
    paths: list[str]
    fields: dict[str, _Field]

    @staticmethod
    def load(directory: Path) -> _Previous | None:
        import numpy as np

        try:
            meta = json.loads((directory / "meta.json").read_text())
            if meta.get("format") != FORMAT:
                return None
            return _Previous(
                [int(r) for r in np.load(directory / "rows.npy")],
                [int(f) for f in np.load(directory / "file_of.npy")],
                list(json.loads((directory / "files.json").read_text())),
                {name: _Field.load(directory, name, mmap=False) for name in FIELDS},
            )
        except (OSError, ValueError, KeyError):
            return None


def _chunk_pairs(db: sqlite3.Connection, rows: Sequence[int]) -> tuple[list[Any], list[Any]]:
    body: dict[int, Any] = {}
    head: dict[int, Any] = {}
    for start in range(0, len(rows), 900):
        part = list(rows[start : start + 900])
        q = f"SELECT row, body, head FROM chunk_terms WHERE row IN ({','.join('?' * len(part))})"
        for row, b_blob, h_blob in db.execute(q, part):
            body[int(row)] = _pairs(b_blob)
            head[int(row)] = _pairs(h_blob)
    empty = _pairs(b"")
    return [body.get(r, empty) for r in rows], [head.get(r, empty) for r in rows]


def _file_pairs(db: sqlite3.Connection, paths: Sequence[str]) -> list[Any]:
    found: dict[str, Any] = {}
    for start in range(0, len(paths), 900):
        part = list(paths[start : start + 900])
        q = f"SELECT path, terms FROM file_terms WHERE path IN ({','.join('?' * len(part))})"
        found.update((p, _pairs(blob)) for p, blob in db.execute(q, part))
    empty = _pairs(b"")
    return [found.get(p, empty) for p in paths]


def _whole(
    db: sqlite3.Connection, current: Sequence[tuple[int, str]], n_terms: int
) -> tuple[list[int], list[str], dict[str, _Field]]:
    rows = [int(r) for r, _ in current]
    paths = list(dict.fromkeys(p for _, p in current))
    body, head = _chunk_pairs(db, rows)
    fields = {
        "body": _Field.from_docs(body, n_terms),
        "head": _Field.from_docs(head, n_terms),
        "file": _Field.from_docs(_file_pairs(db, paths), n_terms),
    }
    return rows, paths, fields


def _update(
    db: sqlite3.Connection, old: _Previous, path_of: dict[int, str], n_terms: int
) -> tuple[list[int], list[str], dict[str, _Field]]:
    import numpy as np

    old_rows = set(old.rows)
    added = sorted(r for r in path_of if r not in old_rows)
    keep_chunk = np.fromiter((r in path_of for r in old.rows), dtype=bool, count=len(old.rows))
    # a file's document changes when any of its chunks did
    changed = {path_of[r] for r in added} | {
        p for r, p in zip(old.rows, _old_paths(old), strict=True) if r not in path_of
    }
    present = set(path_of.values())
    keep_file = np.fromiter(
        (p in present and p not in changed for p in old.paths), dtype=bool, count=len(old.paths)
    )
    new_paths = [p for p in dict.fromkeys(path_of[r] for r in sorted(path_of)) if p in changed]
    body, head = _chunk_pairs(db, added)
    fields = {
        "body": old.fields["body"].updated(keep_chunk, body, n_terms),
        "head": old.fields["head"].updated(keep_chunk, head, n_terms),
        "file": old.fields["file"].updated(keep_file, _file_pairs(db, new_paths), n_terms),
    }
    rows = [r for r, k in zip(old.rows, keep_chunk, strict=True) if k] + added
    paths = [p for p, k in zip(old.paths, keep_file, strict=True) if k] + new_paths
    return rows, paths, fields


def _old_paths(old: _Previous) -> list[str]:
    """The path of each old chunk position (from the old build's file numbers)."""
    return [old.paths[i] for i in old.file_of]
