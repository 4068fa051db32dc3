"""The link table: a corpus's links and what they were made through, kept in one sqlite
artifact (``lexical/<corpus>/links.sqlite``) stamped with the corpus's generation and the
layout's version. Built whole from the corpus's chunks (``build``), opened current
(``table``: built first when missing or stale), and read back row for row (``rows``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from typing import TYPE_CHECKING, Any

from .make import _ROW_COLUMNS, _Links, _make

if TYPE_CHECKING:
    from ..corpuscache import CorpusCache

LINKS_FILE = "links.sqlite"
# the layout of the artifact's tables: another is built again before it is updated
ARTIFACT_VERSION = "3"


def build(cache: CorpusCache) -> int:
    """(Re)build the link artifact of one corpus from its chunks; the number of links."""
    # the corpus's link-only sources (CUTLASS's arch headers) are linked like the rest
    rows = list(cache.iter_rows(_ROW_COLUMNS)) + list(cache.iter_link_rows(_ROW_COLUMNS))
    made = _make(rows, cache.corpus)
    _write_new(cache, made)
    return len(made.mentions)


def _write_new(cache: CorpusCache, made: _Links) -> None:
    path = cache.directory / LINKS_FILE
    # a name of its own: two readers that find the artifact stale may build it at once
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    try:
        db.executescript(
            "CREATE TABLE links(key TEXT, raw TEXT, chunk_id TEXT, role TEXT, how TEXT, via TEXT,"
            " path TEXT);"
            "CREATE TABLE names(kind TEXT, python INTEGER, name TEXT, key TEXT, chunk_id TEXT,"
            " path TEXT);"
            "CREATE TABLE calls(pass INTEGER, python INTEGER, name TEXT, chunk_id TEXT,"
            " path TEXT);"
            "CREATE TABLE info(key TEXT PRIMARY KEY, value TEXT);"
            "CREATE INDEX links_key ON links(key);"
            "CREATE INDEX links_chunk ON links(chunk_id);"
        )
        _insert(db, made)
        info = {
            "generation": cache.get_info("generation") or "",
            "artifact": ARTIFACT_VERSION,
            "present": json.dumps(sorted(made.present)),
            "intrinsic_paths": json.dumps(sorted(made.intrinsic_paths)),
        }
        db.executemany("INSERT INTO info VALUES(?, ?)", sorted(info.items()))
        db.commit()
    finally:
        db.close()
    tmp.replace(path)


def _insert(db: sqlite3.Connection, made: _Links) -> None:
    """The rows of ``made`` (a whole corpus's, or the changed files')."""
    db.executemany(
        "INSERT INTO links VALUES(?,?,?,?,?,?,?)",
        [
            (m.key, m.raw, m.chunk_id, m.role, m.how, m.via, made.paths[m.chunk_id])
            for m in made.mentions
        ],
    )
    db.executemany(
        "INSERT INTO names VALUES(?,?,?,?,?,?)",
        [
            (kind, int(python), name, key, chunk_id, path)
            for kind, targets in (("implementer", made.implementers), ("helper", made.helpers))
            for (python, name), entries in targets.items()
            for key, chunk_id, path in entries
        ],
    )
    db.executemany(
        "INSERT INTO calls VALUES(?,?,?,?,?)",
        [
            (stage, int(python), name, ident, row[2])
            for stage, uses in ((1, made.first), (2, made.second))
            for ident, (row, called) in uses.items()
            for (python, name), _ in called
        ],
    )


def table(cache: CorpusCache) -> sqlite3.Connection:
    """The corpus's link table, rebuilt first when it is missing or older than the cache."""
    path = cache.directory / LINKS_FILE
    generation = cache.get_info("generation") or ""
    if path.exists():
        db = sqlite3.connect(path)
        row = db.execute("SELECT value FROM info WHERE key='generation'").fetchone()
        if row and row[0] == generation:
            return db
        db.close()
    build(cache)
    return sqlite3.connect(path)


def rows(db: sqlite3.Connection) -> tuple[list[Any], ...]:
    """Everything a link table holds, comparable between two builds: each chunk's links in
    their order, the names, calls and info as sorted lists (an applied update must equal a
    full build row for row)."""
    return (
        db.execute("SELECT * FROM links ORDER BY chunk_id, rowid").fetchall(),
        sorted(db.execute("SELECT * FROM names").fetchall()),
        sorted(db.execute("SELECT * FROM calls").fetchall()),
        sorted(db.execute("SELECT * FROM info").fetchall()),
    )
