"""Store: the index of every corpus. A local store keeps each corpus in its cache
(SQLite: chunks, their vectors and term counts, defined names; plus the BM25 and vector
snapshots queries map); with ``--chroma-url`` a chromadb server holds vectors, documents
and metadata (the truth, shared by a team) and the local cache is rebuilt from it.

Layout under the index dir::

    records.json                   one record per corpus (source, version, embedder, ...)
    lexical/<corpus>/meta.sqlite   chunks, files, defined names, vectors, term counts
    lexical/<corpus>/bm25/         BM25 weights of three fields (rebuilt per index run)
    lexical/<corpus>/dense/        the vectors of the corpus's embedder (rebuilt per run)
    embeddings.sqlite              vectors by embedder and reuse key: text is embedded once
    chroma/                        only in stores made before vectors moved into the cache

A corpus's link-only files (``link_only`` in its definition) are listed in ``files`` like
the others, but their chunks live in a table of their own, ``link_chunks``, with no term
counts, vectors or defined names: every table and snapshot a search reads is exactly what
it would be without them, while ``show``, ``related`` and the concept links reach them by
id (``chunks_by_ids``, ``chunks_of_file``, ``iter_link_rows``).

A chunk, its vectors and its term counts are written in one transaction, so a run killed
at any moment leaves a store that answers queries; the next run sees the files whose hash
does not match and redoes them. With a chroma server, writes go to chroma first, then the
cache, and chroma records the cache does not know are removed at the end of a run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import stat
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import lexical
from . import vectors as dense_vectors
from .boilerplate import clean_title
from .corpus import Chunk
from .errors import UserError

if TYPE_CHECKING:
    import numpy as np

RECORD_KEY = "ctxkernel"
COLLECTION_PREFIX = "ck-"
CHROMA_BATCH = 1000
# 2: vectors and term counts in the corpus cache (before: vectors only in chroma)
STORE_FORMAT = 2

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


@dataclass
class CorpusRecord:
    """What an index run recorded about a corpus (kept in the chroma collection)."""

    name: str
    source_kind: str = ""
    origin: str = ""
    version: str = ""
    ref: str = ""
    indexed_at: float = 0.0
    files: int = 0
    chunks: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    model: str = ""  # the embedder's key: what the stored vectors depend on
    generation: str = ""
    complete: bool = False
    seconds: float = 0.0
    embedder: str = ""  # how to get that embedder back: "static", "minilm" or a model path
    dim: int = 0
    recipe: str = ""  # digest of the embedder's recipe (model, vocabulary, sizes)
    store_format: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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


def _chunk_metadata(c: Chunk) -> dict[str, Any]:
    return {
        "path": c.path, "start_line": c.start_line, "end_line": c.end_line, "symbol": c.symbol[:500],
        "title": c.title[:500], "doc": c.doc[:1000], "anchor": c.anchor, "defines": " ".join(c.defines)[:1000],
        "language": c.language, "kind": c.kind, "arch": ",".join(c.arch), "commit": c.commit, "url": c.url,
        "file_hash": c.file_hash,
    }  # fmt: skip


def _metadata_to_chunk(corpus: str, text: str, m: dict[str, Any]) -> Chunk:
    return Chunk(
        corpus=corpus,
        path=str(m.get("path", "")),
        start_line=int(m.get("start_line", 1)),
        end_line=int(m.get("end_line", 1)),
        text=text or "",
        symbol=str(m.get("symbol", "")),
        title=str(m.get("title", "")),
        doc=str(m.get("doc", "")),
        anchor=str(m.get("anchor", "")),
        defines=tuple(str(m.get("defines", "")).split()),
        language=str(m.get("language", "text")),
        kind=str(m.get("kind", "source")),
        arch=tuple(a for a in str(m.get("arch", "")).split(",") if a),
        commit=str(m.get("commit", "")),
        url=str(m.get("url", "")),
        file_hash=str(m.get("file_hash", "")),
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


class Store:
    """The index: one local cache per corpus, and one chroma collection per corpus on a
    chroma server when there is one."""

    def __init__(self, index_dir: Path, chroma_url: str | None = None) -> None:
        self.index_dir = Path(index_dir)
        self.chroma_url = chroma_url
        self._client: Any = None
        self._caches: dict[str, CorpusCache] = {}
        self._collections: dict[str, Any] = {}  # handles kept for queries
        self._records_read: tuple[tuple[int, int, int], dict[str, dict[str, Any]]] | None = None

    @property
    def local(self) -> bool:
        """Vectors and records live in the local caches (no chroma server)."""
        return not self.chroma_url

    # chroma
    def client(self) -> Any:
        if self._client is None:
            os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            if self.chroma_url:
                self._client = _http_client(self.chroma_url, settings)
            else:
                self.index_dir.mkdir(parents=True, exist_ok=True)
                self._client = chromadb.PersistentClient(
                    path=str(self.index_dir / "chroma"), settings=settings
                )
        return self._client

    def collection(self, corpus: str, create: bool = False) -> Any:
        name = COLLECTION_PREFIX + corpus
        client = self.client()
        if create:
            return client.get_or_create_collection(
                name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        try:
            return client.get_collection(name, embedding_function=None)
        except Exception:  # chroma raises NotFoundError / ValueError depending on version
            return None

    # Corpus records live in records.json in a local store, and in the collections'
    # metadata on a chroma server (shared by everyone who uses it). A local store made
    # before records.json existed has them in its chroma dir: read once, then mirrored.
    @property
    def _records_file(self) -> Path:
        return self.index_dir / "records.json"

    def _local_records(self) -> dict[str, dict[str, Any]] | None:
        if self.chroma_url:
            return None
        if not self._records_file.is_file():
            # nothing indexed here yet, or the file was deleted, or a store made before
            # records.json existed: what the caches (or a legacy chroma dir) recorded
            records = self._recovered_records()
            if records:
                self._write_local_records(records)
            return records
        try:
            # read again only when the file changed (a search asks several times)
            st = self._records_file.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            if self._records_read is not None and self._records_read[0] == stamp:
                return dict(self._records_read[1])
            data = json.loads(self._records_file.read_text())
        except (OSError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict):
            self._records_read = (stamp, data)
            return dict(data)
        # a damaged file: write it again from the copies each corpus keeps
        data = self._recovered_records()
        self._write_local_records(data)
        return data

    def _recovered_records(self) -> dict[str, dict[str, Any]]:
        """The records as the corpus caches keep them (each run writes its corpus's record
        there too), else those of a legacy chroma dir."""
        if (self.index_dir / "chroma").is_dir():
            return self._records_from_chroma()
        out: dict[str, dict[str, Any]] = {}
        for db_path in sorted((self.index_dir / "lexical").glob("*/meta.sqlite")):
            name = db_path.parent.name
            try:
                raw = self.cache(name).get_info("record")
                data = json.loads(raw) if raw else None
            except (sqlite3.Error, json.JSONDecodeError):
                continue  # a damaged cache: that corpus is indexed again
            if isinstance(data, dict):
                out[name] = data
        return out

    def forget_local_records(self) -> None:
        """Empty the records mirror (the chroma store it mirrored was set aside)."""
        self._write_local_records({})

    def close(self) -> None:
        """Let go of the chroma client and its files (before the store is moved)."""
        self._collections.clear()
        if self._client is not None:
            self._client = None
            from chromadb.api.client import SharedSystemClient

            SharedSystemClient.clear_system_cache()

    def _write_local_records(self, records: dict[str, dict[str, Any]]) -> None:
        if self.chroma_url:
            return
        self.index_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._records_file.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(json.dumps(records, indent=1, sort_keys=True))
        os.replace(tmp, self._records_file)

    def corpora(self) -> list[str]:
        local = self._local_records()
        if local is not None:
            return sorted(local)
        if self.local and not (self.index_dir / "chroma").is_dir():
            return []
        names = []
        for col in self.client().list_collections():
            name = col if isinstance(col, str) else col.name
            if name.startswith(COLLECTION_PREFIX):
                names.append(name[len(COLLECTION_PREFIX) :])
        return sorted(names)

    def record(self, corpus: str) -> CorpusRecord | None:
        local = self._local_records()
        if local is not None:
            return _record_from(corpus, local[corpus]) if corpus in local else None
        if self.local and not (self.index_dir / "chroma").is_dir():
            return None
        col = self.collection(corpus)
        if col is None:
            return None
        raw = (col.metadata or {}).get(RECORD_KEY)
        return _record_from(corpus, json.loads(raw) if raw else {})

    def set_record(self, record: CorpusRecord) -> None:
        if not self.local:
            col = self.collection(record.name, create=True)
            col.modify(metadata={RECORD_KEY: json.dumps(record.to_json())})
            return
        local = self._local_records() or {}
        local[record.name] = record.to_json()
        # the cache's copy: records.json is written again from these when it is lost
        self.cache(record.name).set_info("record", json.dumps(record.to_json()))
        self._write_local_records(local)

    def _records_from_chroma(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for col in self.client().list_collections():
            name = col if isinstance(col, str) else col.name
            if not name.startswith(COLLECTION_PREFIX):
                continue
            full = self.client().get_collection(name, embedding_function=None)
            raw = (full.metadata or {}).get(RECORD_KEY)
            out[name[len(COLLECTION_PREFIX) :]] = (
                json.loads(raw) if raw else {"name": name[len(COLLECTION_PREFIX) :]}
            )
        return out

    def upsert(self, corpus: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Write chunks and vectors to the chroma server (a local store keeps them in the
        cache: ``CorpusCache.replace_files``)."""
        if self.local:
            return
        col = self.collection(corpus, create=True)
        for start in range(0, len(chunks), CHROMA_BATCH):
            part = chunks[start : start + CHROMA_BATCH]
            col.upsert(
                ids=[c.id for c in part],
                embeddings=vectors[start : start + len(part)],
                documents=[c.text for c in part],
                metadatas=[_chunk_metadata(c) for c in part],
            )

    def delete_ids(self, corpus: str, ids: Iterable[str]) -> None:
        ids = list(ids)
        if self.local or not ids:
            return
        col = self.collection(corpus)
        if col is None or not ids:
            return
        for start in range(0, len(ids), CHROMA_BATCH):
            col.delete(ids=ids[start : start + CHROMA_BATCH])

    def chroma_ids(self, corpus: str) -> set[str]:
        """Ids of the corpus's chunks on the chroma server (none in a local store)."""
        if self.local:
            return set()
        col = self.collection(corpus)
        if col is None:
            return set()
        out: set[str] = set()
        offset = 0
        while True:
            got = col.get(include=[], limit=5000, offset=offset)
            out.update(got["ids"])
            if len(got["ids"]) < 5000:
                return out
            offset += 5000

    def query(
        self, corpus: str, vector: np.ndarray, n: int, where: dict[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """(chunk id, cosine distance) of the nearest chunks on the chroma server. A local
        store's vectors are searched in the corpus cache's snapshot (``CorpusCache.dense``)."""
        if self.local:
            raise RuntimeError("Store.query asks a chroma server; this store is local")
        col = self._query_collection(corpus)
        if col is None:
            return []
        # asking for more than the collection holds returns all of it: no count() round
        # trip (5 ms a corpus) on the hot path
        try:
            got = col.query(
                query_embeddings=[vector],
                n_results=max(1, n),
                where=where or None,
                include=["distances"],
            )
        except Exception:  # an empty collection, or a handle gone stale after a re-index
            self._collections.pop(corpus, None)
            col = self.collection(corpus)
            if col is None or col.count() == 0:
                return []
            got = col.query(
                query_embeddings=[vector],
                n_results=max(1, min(n, col.count())),
                where=where or None,
                include=["distances"],
            )
        return list(zip(got["ids"][0], got["distances"][0], strict=False))

    def _query_collection(self, corpus: str) -> Any:
        cached = self._collections.get(corpus)
        if cached is None:
            cached = self.collection(corpus)
            if cached is not None:
                self._collections[corpus] = cached
        return cached

    def drop(self, corpus: str) -> None:
        self._collections.pop(corpus, None)
        if not self.local:
            try:
                self.client().delete_collection(COLLECTION_PREFIX + corpus)
            except Exception:  # none to drop: chroma's error for that differs by version
                pass
        local = self._local_records()
        if local is not None and corpus in local:
            del local[corpus]
            self._write_local_records(local)
        self.cache(corpus).clear()
        self._caches.pop(corpus, None)

    # local cache
    def cache(self, corpus: str) -> CorpusCache:
        cache = self._caches.get(corpus)
        if cache is None:
            cache = CorpusCache(self.index_dir / "lexical" / corpus, corpus)
            self._caches[corpus] = cache
        return cache

    def synced_cache(self, corpus: str, record: CorpusRecord | None = None) -> CorpusCache:
        """The corpus's cache, rebuilt from chroma when another writer moved it on
        (a shared server, or a cache deleted by hand)."""
        cache = self.cache(corpus)
        if self.local:
            return cache  # the cache is the truth
        record = record or self.record(corpus)
        if record is None:
            return cache
        if cache.exists() and cache.get_info("generation") == record.generation:
            return cache
        self.rebuild_cache_from_chroma(corpus, record)
        return cache

    def rebuild_cache_from_chroma(self, corpus: str, record: CorpusRecord) -> None:
        col = self.collection(corpus)
        cache = self.cache(corpus)
        cache.clear()
        if col is None:
            return
        offset = 0
        by_path: dict[str, list[Chunk]] = {}
        while True:
            got = col.get(include=["documents", "metadatas"], limit=2000, offset=offset)
            for doc, meta in zip(got["documents"], got["metadatas"], strict=False):
                c = _metadata_to_chunk(corpus, doc or "", dict(meta or {}))
                by_path.setdefault(c.path, []).append(c)
            if len(got["ids"]) < 2000:
                break
            offset += 2000
        entries = [
            FileEntry(p, cs[0].file_hash, "", max(c.end_line for c in cs))
            for p, cs in by_path.items()
        ]
        cache.replace_files(entries, [c for cs in by_path.values() for c in cs])
        cache.build_bm25()
        cache.set_info("generation", record.generation)


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


def _http_client(url: str, settings: Any) -> Any:
    import urllib.parse

    import chromadb

    parsed = urllib.parse.urlparse(url if "://" in url else f"http://{url}")
    if not parsed.hostname:
        raise UserError(f"--chroma-url {url!r}: expected http://HOST:PORT")
    try:
        return chromadb.HttpClient(
            host=parsed.hostname,
            port=parsed.port or 8000,
            ssl=parsed.scheme == "https",
            settings=settings,
        )
    except Exception as exc:
        raise UserError(f"cannot reach the chroma server at {url}: {exc}") from exc


def _record_from(corpus: str, data: dict[str, Any]) -> CorpusRecord:
    known = {k: v for k, v in data.items() if k in CorpusRecord.__dataclass_fields__}
    known.setdefault("name", corpus)
    return CorpusRecord(**known)


def new_generation() -> str:
    return f"{int(time.time())}-{uuid.uuid4().hex[:8]}"
