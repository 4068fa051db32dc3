"""The local cache of one corpus (``CorpusCache``): a SQLite file of its chunks, files,
defined names, vectors and term counts, plus the BM25 and vector snapshots queries map.

Layout under ``lexical/<corpus>/``: ``meta.sqlite`` (the tables below), ``bm25/`` (BM25
weights of three fields, rebuilt per index run), ``dense/`` (the vectors of the corpus's
embedder, rebuilt per run). A corpus's link-only files are listed in ``files`` like the
others, but their chunks live in ``link_chunks``, with no term counts, vectors or
defined names (see ``store.py`` for the index as a whole).

A chunk, its vectors and its term counts are written in one transaction, so a run killed
at any moment leaves a cache that answers queries.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import lexical
from . import vectors as dense_vectors
from .boilerplate import clean_title
from .corpus import Chunk

if TYPE_CHECKING:
    import numpy as np

_CHUNK_COLUMNS = """
    row INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, path TEXT NOT NULL,
    start_line INT, end_line INT, symbol TEXT, title TEXT, doc TEXT, anchor TEXT,
    defines TEXT, language TEXT, kind TEXT, arch TEXT, commit_sha TEXT, url TEXT,
    file_hash TEXT, text TEXT"""
# link_chunks: the chunks of link-only files, the same columns, apart from what search reads
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS chunks({_CHUNK_COLUMNS});
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
CREATE TABLE IF NOT EXISTS link_chunks({_CHUNK_COLUMNS});
CREATE INDEX IF NOT EXISTS link_chunks_path ON link_chunks(path);
CREATE TABLE IF NOT EXISTS files(path TEXT PRIMARY KEY, file_hash TEXT, local TEXT, lines INT);
CREATE TABLE IF NOT EXISTS defines(lname TEXT NOT NULL, name TEXT NOT NULL, row INT NOT NULL);
CREATE INDEX IF NOT EXISTS defines_lname ON defines(lname);
CREATE TABLE IF NOT EXISTS info(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS file_stats(path TEXT PRIMARY KEY, size INT, mtime_ns INT, file_hash TEXT);
CREATE TABLE IF NOT EXISTS wanted(path TEXT PRIMARY KEY, yes INT);
CREATE TABLE IF NOT EXISTS file_ids(path TEXT PRIMARY KEY, dev INT, ino INT, nlink INT);
"""


@dataclass(frozen=True)
class FileEntry:
    path: str
    file_hash: str
    local: str
    lines: int


def _chunk_to_row(c: Chunk) -> tuple[Any, ...]:
    return (
        c.id,
        c.path,
        c.start_line,
        c.end_line,
        c.symbol,
        c.title,
        c.doc,
        c.anchor,
        " ".join(c.defines),
        c.language,
        c.kind,
        ",".join(c.arch),
        c.commit,
        c.url,
        c.file_hash,
        c.text,
    )


_ROW_COLUMNS = "id, path, start_line, end_line, symbol, title, doc, anchor, defines, language, kind, arch, commit_sha, url, file_hash, text"


def _row_to_chunk(corpus: str, r: sqlite3.Row | tuple[Any, ...]) -> Chunk:
    return Chunk(
        corpus=corpus,
        path=r[1],
        start_line=int(r[2]),
        end_line=int(r[3]),
        symbol=r[4] or "",
        title=clean_title(r[5] or "", r[15] or "", r[1]),  # indexes made before boilerplate.py
        doc=r[6] or "",
        anchor=r[7] or "",
        defines=tuple((r[8] or "").split()),
        language=r[9] or "text",
        kind=r[10] or "source",
        arch=tuple(a for a in (r[11] or "").split(",") if a),
        commit=r[12] or "",
        url=r[13] or "",
        file_hash=r[14] or "",
        text=r[15] or "",
    )


class CorpusCache:
    """The local SQLite + BM25 side of one corpus."""

    def __init__(self, directory: Path, corpus: str) -> None:
        self.directory = directory
        self.corpus = corpus
        self._db: sqlite3.Connection | None = None
        self._bm25: Any = None
        self._bm25_mtime = 0.0
        self._dense: Any = None
        self._dense_mtime = 0.0
        self._terms: lexical.TermIds | None = None
        self._files_memo: tuple[tuple[Any, int], dict[str, FileEntry]] | None = None

    @property
    def db_path(self) -> Path:
        return self.directory / "meta.sqlite"

    @property
    def bm25_dir(self) -> Path:
        return self.directory / "bm25"

    def db(self) -> sqlite3.Connection:
        if self._db is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.db_path, timeout=30, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA + lexical.SCHEMA + dense_vectors.SCHEMA)
            self._db = db
        return self._db

    def term_ids(self) -> lexical.TermIds:
        if self._terms is None:
            self._terms = lexical.TermIds(self.db())
        return self._terms

    def exists(self) -> bool:
        return self.db_path.is_file()

    def close(self) -> None:
        self._files_memo = None
        self._terms = None
        if self._db is not None:
            self._db.close()
            self._db = None

    # info
    def get_info(self, key: str) -> str | None:
        row = self.db().execute("SELECT value FROM info WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_info(self, key: str, value: str) -> None:
        with self.db() as db:
            db.execute("INSERT OR REPLACE INTO info(key, value) VALUES(?, ?)", (key, value))

    # files and chunks
    def files(self) -> dict[str, FileEntry]:
        """Every indexed file; memoised until this cache changes (grep asks on every call)."""
        key = (self.get_info("generation"), self.db().total_changes)
        if self._files_memo is not None and self._files_memo[0] == key:
            return self._files_memo[1]
        rows = self.db().execute("SELECT path, file_hash, local, lines FROM files").fetchall()
        files = {r[0]: FileEntry(r[0], r[1] or "", r[2] or "", int(r[3] or 0)) for r in rows}
        self._files_memo = (key, files)
        return files

    def file(self, path: str) -> FileEntry | None:
        r = (
            self.db()
            .execute("SELECT path, file_hash, local, lines FROM files WHERE path=?", (path,))
            .fetchone()
        )
        return FileEntry(r[0], r[1] or "", r[2] or "", int(r[3] or 0)) if r else None

    def chunk_ids_of(self, paths: Iterable[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        db = self.db()
        for path in paths:
            out[path] = {r[0] for r in db.execute("SELECT id FROM chunks WHERE path=?", (path,))}
        return out

    def replace_files(
        self,
        entries: Sequence[FileEntry],
        chunks: Sequence[Chunk],
        vectors: np.ndarray | None = None,
        embedder: str = "",
        terms: Sequence[lexical.ChunkTerms] | None = None,
        *,
        link_only: bool = False,
    ) -> None:
        """Swap in the chunks of these files (with their term counts, and their vectors
        of embedder ``embedder`` when given) in one transaction; ``terms``: the chunks'
        term counts when the caller has them already. ``link_only``: the files are
        link-only sources, their chunks go to ``link_chunks`` (nothing a search reads)."""
        if link_only:
            self._replace_link_files(entries, chunks)
            return
        if terms is None:
            terms = [lexical.terms_of(c) for c in chunks]
        try:
            with self.db() as db:
                for e in entries:
                    self._drop_file_chunks(db, e.path)
                    db.execute(
                        "INSERT OR REPLACE INTO files(path, file_hash, local, lines) VALUES(?,?,?,?)",
                        (e.path, e.file_hash, e.local, e.lines),
                    )
                new_rows: list[int] = []
                for c in chunks:
                    cur = db.execute(
                        f"INSERT OR REPLACE INTO chunks({_ROW_COLUMNS}) VALUES({','.join('?' * 16)})",
                        _chunk_to_row(c),
                    )
                    row = int(cur.lastrowid or 0)
                    new_rows.append(row)
                    names = {n for n in c.defines if n}
                    db.executemany(
                        "INSERT INTO defines(lname, name, row) VALUES(?,?,?)",
                        [(n.lower(), n, row) for n in names],
                    )
                lexical.write_chunk_terms(db, self.term_ids(), new_rows, terms)
                by_file: dict[str, list[lexical.ChunkTerms]] = {e.path: [] for e in entries}
                for c, ct in zip(chunks, terms, strict=True):
                    by_file.setdefault(c.path, []).append(ct)
                for path, cts in by_file.items():
                    lexical.write_file_terms(db, self.term_ids(), path, cts)
                if vectors is not None and embedder:
                    dense_vectors.write(db, embedder, new_rows, vectors)
        except BaseException:
            self.term_ids().forget()  # ids handed out in the rolled-back transaction
            raise

    def _replace_link_files(self, entries: Sequence[FileEntry], chunks: Sequence[Chunk]) -> None:
        with self.db() as db:
            for e in entries:
                # a file that was searched before (the definition changed) leaves the
                # searched tables: its terms, vectors and file document go
                self._drop_file_chunks(db, e.path)
                lexical.delete_file(db, e.path)
                db.execute(
                    "INSERT OR REPLACE INTO files(path, file_hash, local, lines) VALUES(?,?,?,?)",
                    (e.path, e.file_hash, e.local, e.lines),
                )
            db.executemany(
                f"INSERT OR REPLACE INTO link_chunks({_ROW_COLUMNS}) VALUES({','.join('?' * 16)})",
                [_chunk_to_row(c) for c in chunks],
            )

    def _drop_file_chunks(self, db: sqlite3.Connection, path: str) -> None:
        """Delete one file's chunks, searched or link-only, with what hangs off them."""
        rows = [r[0] for r in db.execute("SELECT row FROM chunks WHERE path=?", (path,))]
        self._delete_rows(db, rows)
        db.execute("DELETE FROM chunks WHERE path=?", (path,))
        db.execute("DELETE FROM link_chunks WHERE path=?", (path,))

    @staticmethod
    def _delete_rows(db: sqlite3.Connection, rows: Sequence[int]) -> None:
        db.executemany("DELETE FROM defines WHERE row=?", [(r,) for r in rows])
        lexical.delete_rows(db, rows)
        dense_vectors.delete_rows(db, rows)

    def remove_files(self, paths: Iterable[str]) -> None:
        with self.db() as db:
            for path in paths:
                self._drop_file_chunks(db, path)
                db.execute("DELETE FROM files WHERE path=?", (path,))
                lexical.delete_file(db, path)

    def set_local(self, path: str, local: str) -> None:
        """Where an indexed file's content now lives on this machine (nothing else moves)."""
        with self.db() as db:
            db.execute("UPDATE files SET local=? WHERE path=?", (local, path))

    def link_only_paths(self) -> set[str]:
        """The files whose chunks are stored as link-only."""
        return {r[0] for r in self.db().execute("SELECT DISTINCT path FROM link_chunks")}

    def link_count(self) -> int:
        return int(self.db().execute("SELECT COUNT(*) FROM link_chunks").fetchone()[0])

    def iter_link_rows(self, columns: str = "row, text") -> Iterator[tuple[Any, ...]]:
        """Rows of the link-only chunks (their ``row`` numbers are their own, not search rows)."""
        yield from self.db().execute(f"SELECT {columns} FROM link_chunks ORDER BY row")

    # (size, mtime) of source files when their hash was taken: a re-index reads only
    # the files whose stat moved
    def file_stats(self) -> dict[str, tuple[int, int, str]]:
        return {
            p: (int(size), int(mtime), h)
            for p, size, mtime, h in self.db().execute(
                "SELECT path, size, mtime_ns, file_hash FROM file_stats"
            )
        }

    def set_file_stats(
        self, stats: Sequence[tuple[str, int, int, str]], older_than_ns: int
    ) -> None:
        with self.db() as db:
            db.executemany(
                "INSERT OR REPLACE INTO file_stats(path, size, mtime_ns, file_hash) VALUES(?,?,?,?)",
                [s for s in stats if s[2] < older_than_ns],
            )

    # which file on disk each recorded local copy was when it was indexed (device, inode,
    # link count): ``confine`` refuses a copy that is another file now (a hard link to
    # one outside the corpus swapped in keeps a path that resolves inside it)
    def file_ids(self, paths: Iterable[str] | None = None) -> dict[str, tuple[int, int, int]]:
        q = "SELECT path, dev, ino, nlink FROM file_ids"
        if paths is None:
            rows = self.db().execute(q).fetchall()
        else:
            rows = [r for p in paths for r in self.db().execute(q + " WHERE path=?", (p,))]
        return {str(p): (int(d), int(i), int(n)) for p, d, i, n in rows}

    def set_file_ids(self, ids: Sequence[tuple[str, int, int, int]]) -> None:
        """The identities of every file an index run kept, in place of the last run's."""
        with self.db() as db:
            db.execute("DELETE FROM file_ids")
            db.executemany("INSERT OR REPLACE INTO file_ids VALUES(?,?,?,?)", ids)

    # the corpus's include/exclude answer per source path, for the globs that gave it
    def wanted_paths(self, globs: str) -> dict[str, bool]:
        if self.get_info("wanted_globs") != globs:
            return {}
        return {p: bool(y) for p, y in self.db().execute("SELECT path, yes FROM wanted")}

    def remember_wanted(self, globs: str, answers: dict[str, bool]) -> None:
        with self.db() as db:
            if self.get_info("wanted_globs") != globs:
                db.execute("DELETE FROM wanted")
                db.execute(
                    "INSERT OR REPLACE INTO info(key, value) VALUES('wanted_globs', ?)", (globs,)
                )
            db.executemany(
                "INSERT OR REPLACE INTO wanted(path, yes) VALUES(?, ?)",
                [(p, int(y)) for p, y in answers.items()],
            )

    # vectors (local store)
    def rows_without_vectors(self, embedder: str) -> list[int]:
        return dense_vectors.rows_without(self.db(), embedder)

    def write_vectors(self, embedder: str, rows: Sequence[int], vectors: np.ndarray) -> None:
        with self.db() as db:
            dense_vectors.write(db, embedder, rows, vectors)

    def keep_vectors_of(self, embedder: str) -> None:
        dense_vectors.keep_only(self.db(), embedder)

    def export_dense(self, embedder: str, generation: str) -> int:
        count = dense_vectors.export(self.db(), self.dense_dir, embedder, generation)
        self._dense = None
        return count

    @property
    def dense_dir(self) -> Path:
        return self.directory / "dense"

    def dense(self) -> Any:
        """The corpus's DenseIndex snapshot, or None (loaded once, reloaded when rebuilt)."""
        mtime = _file_mtime(os.path.join(self.directory, "dense", "meta.json"))
        if mtime is None:
            return None
        if self._dense is None or mtime != self._dense_mtime:
            self._dense = dense_vectors.DenseIndex.load(self.dense_dir)
            self._dense_mtime = mtime
        return self._dense

    def clear(self) -> None:
        self.close()
        shutil.rmtree(self.directory, ignore_errors=True)
        self._bm25 = None
        self._dense = None

    def all_ids(self) -> set[str]:
        return {r[0] for r in self.db().execute("SELECT id FROM chunks")}

    def count(self) -> int:
        return int(self.db().execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def chunks_by_rows(self, rows: Sequence[int]) -> dict[int, Chunk]:
        if not rows:
            return {}
        found = _where_in(self.db(), f"SELECT row, {_ROW_COLUMNS} FROM chunks", "row", rows)
        return {int(r[0]): _row_to_chunk(self.corpus, r[1:]) for r in found}

    def texts_by_rows(self, rows: Sequence[int]) -> dict[int, str]:
        """The text of each row, in ``chunks_by_rows``'s order (a search reading a
        pool of chunks for their text alone skips building their Chunks)."""
        found = _where_in(self.db(), "SELECT row, text FROM chunks", "row", rows)
        return {int(r[0]): r[1] or "" for r in found}

    def chunks_by_ids(self, ids: Sequence[str]) -> dict[str, Chunk]:
        """Chunks by id, link-only ones included (a link or a hit id may name one)."""
        out: dict[str, Chunk] = {}
        for table in ("chunks", "link_chunks"):
            wanted = [i for i in ids if i not in out]
            for r in _where_in(self.db(), f"SELECT {_ROW_COLUMNS} FROM {table}", "id", wanted):
                out[r[0]] = _row_to_chunk(self.corpus, r)
        return out

    def rows_for_ids(self, ids: Sequence[str]) -> dict[str, int]:
        return {
            r[0]: int(r[1]) for r in _where_in(self.db(), "SELECT id, row FROM chunks", "id", ids)
        }

    def chunks_of_file(self, path: str) -> list[Chunk]:
        """A file's chunks in order (a link-only file's from ``link_chunks``)."""
        for table in ("chunks", "link_chunks"):
            q = f"SELECT {_ROW_COLUMNS} FROM {table} WHERE path=? ORDER BY start_line"
            found = [_row_to_chunk(self.corpus, r) for r in self.db().execute(q, (path,))]
            if found:
                return found
        return []

    def file_chunk_rows(self, path: str) -> list[tuple[int, int, int, str, str]]:
        """(row, start line, end line, symbol, defined names) of a file's searchable
        chunks, in file order (a pasted frame's file: which chunk holds its line)."""
        q = "SELECT row, start_line, end_line, symbol, defines FROM chunks WHERE path=? ORDER BY start_line"
        return [
            (int(r[0]), int(r[1]), int(r[2]), r[3] or "", r[4] or "")
            for r in self.db().execute(q, (path,))
        ]

    def defined(self, name: str, *, exact_case: bool = False) -> list[tuple[int, str]]:
        """(row, name) of chunks that define ``name`` (case-insensitive unless asked)."""
        rows = (
            self.db()
            .execute("SELECT row, name FROM defines WHERE lname=?", (name.lower(),))
            .fetchall()
        )
        if exact_case:
            rows = [r for r in rows if r[1] == name]
        return [(int(r[0]), str(r[1])) for r in rows]

    def defined_names(self) -> list[str]:
        return [r[0] for r in self.db().execute("SELECT DISTINCT name FROM defines")]

    def defined_with_titles(self) -> list[tuple[str, str]]:
        """(name, title of a chunk defining it), every distinct pair."""
        q = "SELECT DISTINCT d.name, c.title FROM defines d JOIN chunks c ON c.row = d.row"
        return [(r[0], r[1] or "") for r in self.db().execute(q)]

    def iter_rows(self, columns: str = "row, text") -> Iterator[tuple[Any, ...]]:
        yield from self.db().execute(f"SELECT {columns} FROM chunks ORDER BY row")

    def filter_rows(
        self, *, paths_glob: str | None, language: str | None, kind: str | None
    ) -> set[int] | None:
        """Rows passing the filters, or None when there is no filter."""
        if not (paths_glob or language or kind):
            return None
        clauses, args = [], []
        if language:
            clauses.append("language=?")
            args.append(language)
        if kind:
            clauses.append("kind=?")
            args.append(kind)
        if paths_glob:
            clauses.append("path GLOB ?")
            args.append(paths_glob)
        q = "SELECT row FROM chunks WHERE " + " AND ".join(clauses)
        return {int(r[0]) for r in self.db().execute(q, args)}

    # lexical index
    def build_bm25(self) -> int:
        """Rebuild the lexical index from the stored term counts; returns the number of chunks."""
        count = lexical.LexicalIndex.build(self.bm25_dir, self.db(), self.term_ids())
        self._bm25 = None
        return count

    def bm25(self) -> Any:
        """The corpus's LexicalIndex, or None when there is none (in this format) yet;
        loaded once, reloaded when rebuilt."""
        mtime = _file_mtime(os.path.join(self.directory, "bm25", "meta.json"))
        if mtime is None:
            return None
        if self._bm25 is None or mtime != self._bm25_mtime:
            lookup = lexical.TermIds(self.db(), absent_too=True).lookup
            self._bm25, self._bm25_mtime = lexical.LexicalIndex.load(self.bm25_dir, lookup), mtime
        return self._bm25


def _file_mtime(path: str) -> float | None:
    """The modification time of the regular file at ``path``, None where there is none
    (``Path.is_file`` then ``stat`` in one call: a search asks for its corpora's snapshots
    a few dozen times)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return None
        raise
    return st.st_mtime if stat.S_ISREG(st.st_mode) else None


def _where_in(
    db: sqlite3.Connection, select: str, column: str, values: Sequence[Any]
) -> Iterator[tuple[Any, ...]]:
    """``select`` (a SELECT ... FROM ...) of the rows whose ``column`` is one of ``values``,
    500 values a statement (SQLite's bound on parameters)."""
    for start in range(0, len(values), 500):
        part = list(values[start : start + 500])
        yield from db.execute(f"{select} WHERE {column} IN ({','.join('?' * len(part))})", part)


_Built = TypeVar("_Built")


class PerGeneration(Generic[_Built]):
    """One value built from a corpus's index per index generation (a path table, a
    suffix table), shared by the searches of every thread; a new generation replaces
    the corpus's old value."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], _Built] = {}
        self._lock = threading.Lock()

    def get(self, cache: CorpusCache, generation: str, build: Callable[[], _Built]) -> _Built:
        key = (str(cache.directory), generation)
        with self._lock:
            value = self._values.get(key)
            if value is None:
                for old in [k for k in self._values if k[0] == key[0]]:
                    del self._values[old]
                value = self._values[key] = build()
        return value
