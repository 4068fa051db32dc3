"""Damage: telling a broken index (a truncated BM25 or vector snapshot file, a corrupted
SQLite table, a legacy chroma store that no longer opens) from a bug, naming it in one
line with the command that repairs it, and clearing the broken parts away for
``index --rebuild``.

Nothing is checked on the way in: a query that fails for a reason that is not the
user's asks ``diagnose`` what is broken, so healthy indexes pay nothing.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import UserError

if TYPE_CHECKING:
    from .store import Store


class IndexDamaged(UserError):
    """A part of the index cannot be read; the message names it and the repair."""


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _sqlite_problem(path: Path) -> str:
    """Why the SQLite file at ``path`` cannot be trusted, or ""."""
    if not path.is_file():
        return ""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            row = db.execute("PRAGMA quick_check").fetchone()
        finally:
            db.close()
    except sqlite3.Error as exc:
        return _reason(exc)
    return "" if row and row[0] == "ok" else f"integrity check: {row[0] if row else 'no answer'}"


def lexical_problem(store: Store, corpus: str) -> str:
    """What is broken in a corpus's local cache (chunk table with its vectors and term
    counts, BM25 arrays, vector snapshot), or ""."""
    from .lexical import FIELDS, LexicalIndex, TermIds
    from .links.table import LINKS_FILE
    from .vectors import DenseIndex

    cache = store.cache(corpus)
    where = f"lexical/{corpus}"
    problem = _sqlite_problem(cache.db_path)
    if problem:
        return f"{where}/meta.sqlite: {problem}"
    problem = _sqlite_problem(cache.directory / LINKS_FILE)
    if problem:
        return f"{where}/{LINKS_FILE}: {problem}"
    if (cache.bm25_dir / "meta.json").is_file():
        db = sqlite3.connect(f"file:{cache.db_path}?mode=ro", uri=True, timeout=5)
        try:
            index = LexicalIndex.load(cache.bm25_dir, TermIds(db).lookup)
            if index is not None:
                for name in FIELDS:  # every array read through once
                    f = index.fields[name]
                    _ = (f.indptr.sum(), f.docs.sum(), f.tf.sum(), f.length.sum())
                index.rank(["x"], 1)
        except Exception as exc:  # whatever a truncated numpy or JSON file raises
            return f"{where}/bm25: {_reason(exc)}"
        finally:
            db.close()
    if (cache.dense_dir / "meta.json").is_file():
        try:
            dense = DenseIndex.load(cache.dense_dir)
            if dense is not None and len(dense.rows):
                dense.rank(dense.matrix[0], 1)
        except Exception as exc:
            return f"{where}/dense: {_reason(exc)}"
    return ""


def chroma_problem(store: Store, corpus: str | None = None) -> str:
    """What is broken in the local chroma store (for ``corpus``'s collection), or ""."""
    if store.chroma_url or not (store.index_dir / "chroma").is_dir():
        return ""
    problem = _sqlite_problem(store.index_dir / "chroma" / "chroma.sqlite3")
    if problem:
        return f"chroma/chroma.sqlite3: {problem}"
    try:
        client = store.client()
        client.list_collections()
        col = store.collection(corpus) if corpus else None
        if col is not None:
            got = col.get(limit=1, include=["embeddings"])
            if got["embeddings"] is not None and len(got["embeddings"]):
                col.query(query_embeddings=[got["embeddings"][0]], n_results=1)
    except Exception as exc:  # chromadb's errors differ by version and by layer
        return f"chroma: {_reason(exc)}"
    return ""


def embedding_cache_problem(store: Store) -> str:
    problem = _sqlite_problem(store.index_dir / "embeddings.sqlite")
    return f"embeddings.sqlite: {problem}" if problem else ""


def diagnose(store: Store, corpora: Sequence[str], *, indexing: bool = False) -> str:
    """One line naming what is broken and how to repair it, or "" when nothing is."""
    for corpus in corpora:
        problem = lexical_problem(store, corpus)
        if problem:
            return (
                f"the index of corpus {corpus!r} is damaged ({problem}); repair it with "
                f"`ctxkernel index {corpus} --rebuild`"
            )
    candidates: list[str | None] = [*corpora] or [None]
    for maybe in candidates:
        problem = chroma_problem(store, maybe)
        if problem:
            first = maybe or "NAME"
            return (
                f"the vector store {store.index_dir / 'chroma'} is damaged ({problem}); repair "
                f"it with `ctxkernel index {first} --rebuild` (it is set aside; then index "
                "the other corpora again)"
            )
    if indexing:
        problem = embedding_cache_problem(store)
        if problem:
            first = corpora[0] if corpora else "NAME"
            return (
                f"the embedding cache is damaged ({problem}); repair it with "
                f"`ctxkernel index {first} --rebuild`"
            )
    return ""


@contextmanager
def guard(
    store: Store, corpora: Sequence[str] | None = None, *, indexing: bool = False
) -> Iterator[None]:
    """Turn a failure that damage explains into IndexDamaged; anything else goes on up.
    ``corpora`` are those the operation reads (None: every indexed one)."""
    try:
        yield
    except (UserError, KeyboardInterrupt, MemoryError):
        raise
    except Exception as exc:
        try:
            names = list(corpora) if corpora is not None else _indexed(store)
            message = diagnose(store, names, indexing=indexing)
            if not message and corpora is not None:
                # what a query reads past its corpora (docs' links of every corpus)
                others = [c for c in _indexed(store) if c not in names]
                message = diagnose(store, others, indexing=indexing)
        except Exception:  # diagnosing must never hide the first error
            message = ""
        if message:
            raise IndexDamaged(message) from exc
        raise


def damaged(store: Store, corpora: Sequence[str]) -> dict[str, str]:
    """Corpus -> the one line that names what is broken in its local index and the
    repair, for those of ``corpora`` that are damaged."""
    found: dict[str, str] = {}
    for corpus in corpora:
        try:
            line = diagnose(store, [corpus])
        except Exception as exc:  # a part so broken that diagnosing it fails is damaged too
            line = f"the index of corpus {corpus!r} cannot be read ({_reason(exc)})"
        if line:
            found[corpus] = line
    return found


def _indexed(store: Store) -> list[str]:
    try:
        return store.corpora()
    except Exception:  # the records are what is broken: diagnose finds out which part
        return []


def clear_for_rebuild(store: Store, corpus: str) -> list[str]:
    """Before ``index CORPUS --rebuild``: set aside whatever of the index is broken (the
    shared chroma store, the embedding cache) and drop the corpus. What was done, for
    people."""
    notes: list[str] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if chroma_problem(store, corpus):
        chroma = store.index_dir / "chroma"
        aside = chroma.with_name(f"chroma.damaged-{stamp}")
        store.close()
        shutil.move(str(chroma), str(aside))
        others = [c for c in store.corpora() if c != corpus]
        for name in [*others, corpus]:
            store.cache(name).clear()
        store.forget_local_records()
        notes.append(
            f"moved the damaged vector store aside to {aside.name}"
            + (f"; index these again: {', '.join(others)}" if others else "")
        )
    if embedding_cache_problem(store):
        cache = store.index_dir / "embeddings.sqlite"
        for suffix in ("", "-wal", "-shm"):
            part = cache.with_name(cache.name + suffix)
            if part.exists():
                part.rename(part.with_name(part.name + f".damaged-{stamp}"))
        notes.append("set the damaged embedding cache aside (its vectors are embedded again)")
    if lexical_problem(store, corpus):
        notes.append(f"dropped the damaged local index of {corpus!r}")
    store.drop(corpus)
    return notes
