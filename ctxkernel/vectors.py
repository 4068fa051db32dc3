"""Dense vectors of one corpus in the local store, and exact nearest-neighbour search.

The truth is the ``vectors`` table of the corpus cache's SQLite: one float32 row per
(chunk row, embedder key), written in the same transaction as the chunk. Rows are keyed
by embedder, so switching embedders writes the new vectors beside the old ones and the
store answers with the old ones until the run that switched finishes; vectors of two
embedders are never searched together.

Queries read a snapshot (``dense/``: the matrix and its cache rows as ``.npy``, memory-
mapped) exported at the end of each index run for the embedder the corpus record names.
Search is a matrix-vector product over unit vectors: a few milliseconds for CUTLASS's
20,000 chunks, no approximate index to build or to keep in step. The product runs on one
BLAS thread (``one_blas_thread``): on a busy machine with few cores OpenBLAS's threads wait
on each other (7-16 ms for CUTLASS on 2 shared cores, 2.4 ms on one thread), and the
scores no longer depend on how many cores the machine has.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors(
    row INTEGER NOT NULL, embedder TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY(row, embedder));
"""
FORMAT = 1


def write(db: sqlite3.Connection, key: str, rows: Sequence[int], vectors: np.ndarray) -> None:
    import numpy as np

    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    db.executemany(
        "INSERT OR REPLACE INTO vectors(row, embedder, vec) VALUES(?,?,?)",
        [(int(r), key, arr[i].tobytes()) for i, r in enumerate(rows)],
    )


def delete_rows(db: sqlite3.Connection, rows: Sequence[int]) -> None:
    db.executemany("DELETE FROM vectors WHERE row=?", [(r,) for r in rows])


def rows_without(db: sqlite3.Connection, key: str) -> list[int]:
    """Chunk rows that have no vector of embedder ``key``."""
    return [
        int(r[0])
        for r in db.execute(
            "SELECT c.row FROM chunks c LEFT JOIN vectors v ON v.row = c.row AND v.embedder = ? "
            "WHERE v.row IS NULL ORDER BY c.row",
            (key,),
        )
    ]


def keep_only(db: sqlite3.Connection, key: str) -> None:
    """Drop the vectors of every other embedder (the run that switched has finished)."""
    with db:
        db.execute("DELETE FROM vectors WHERE embedder != ?", (key,))


def export(db: sqlite3.Connection, directory: Path, key: str, generation: str) -> int:
    """Write the snapshot of embedder ``key``'s vectors to ``directory``; returns the rows.
    The last snapshot of the same embedder is updated: only new rows are read."""
    import numpy as np

    current = [
        int(r)
        for (r,) in db.execute(
            "SELECT v.row FROM vectors v JOIN chunks c ON c.row = v.row WHERE v.embedder = ? "
            "ORDER BY v.row",
            (key,),
        )
    ]
    old = DenseIndex.load(directory)
    if old is not None and old.embedder == key and len(old.rows):
        wanted = set(current)
        keep = np.fromiter((int(r) in wanted for r in old.rows), dtype=bool, count=len(old.rows))
        had = {int(r) for r in old.rows}
        added = [r for r in current if r not in had]
        new = _read(db, key, added, int(old.matrix.shape[1]))
        rows = np.concatenate([np.asarray(old.rows)[keep], np.asarray(added, dtype=np.int64)])
        matrix = np.concatenate([np.asarray(old.matrix)[keep], new])
    else:
        rows = np.asarray(current, dtype=np.int64)
        matrix = _read(db, key, current, 0)
    tmp = directory.parent / f"{directory.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.save(tmp / "matrix.npy", matrix)
    np.save(tmp / "rows.npy", rows)
    dim = int(matrix.shape[1]) if matrix.ndim == 2 else 0
    meta = {
        "format": FORMAT,
        "embedder": key,
        "dim": dim,
        "rows": len(rows),
        "generation": generation,
    }
    (tmp / "meta.json").write_text(json.dumps(meta))
    gone = directory.parent / f"{directory.name}.old-{os.getpid()}"
    if directory.exists():
        os.replace(directory, gone)
    os.replace(tmp, directory)
    shutil.rmtree(gone, ignore_errors=True)
    return len(rows)


def _read(db: sqlite3.Connection, key: str, rows: Sequence[int], dim: int) -> np.ndarray:
    """The vectors of ``rows`` (in that order) as a float32 matrix."""
    import numpy as np

    blobs: dict[int, bytes] = {}
    for start in range(0, len(rows), 900):
        part = list(rows[start : start + 900])
        q = (
            "SELECT row, vec FROM vectors WHERE embedder = ? "
            f"AND row IN ({','.join('?' * len(part))})"
        )
        blobs.update((int(r), b) for r, b in db.execute(q, [key, *part]))
    if not rows:
        return np.zeros((0, dim), dtype=np.float32)
    data = b"".join(blobs[r] for r in rows)
    return np.frombuffer(data, dtype=np.float32).reshape(len(rows), -1).copy()


_BLAS: Any = None  # a threadpoolctl.ThreadpoolController, False when there is none


def one_blas_thread() -> Any:
    """A context in which numpy's BLAS uses one thread (a no-op without threadpoolctl)."""
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        except Exception:  # not installed, or no BLAS it knows: the default threads stay
            _BLAS = False
    if not _BLAS:
        return contextlib.nullcontext()
    return _BLAS.limit(limits=1, user_api="blas")


@dataclass
class DenseIndex:
    rows: Any  # np.ndarray[int64]: position -> cache row
    matrix: Any  # np.ndarray[float32] (n, dim), unit rows, memory-mapped
    embedder: str
    generation: str

    @staticmethod
    def load(directory: Path) -> DenseIndex | None:
        import numpy as np

        try:
            meta = json.loads((directory / "meta.json").read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if meta.get("format") != FORMAT:
            return None
        return DenseIndex(
            np.load(directory / "rows.npy"),
            np.load(directory / "matrix.npy", mmap_mode="r"),
            str(meta.get("embedder", "")),
            str(meta.get("generation", "")),
        )

    def rank(self, vector: Any, depth: int, allowed: Any = None) -> list[int]:
        """Cache rows by cosine similarity to ``vector``, best first; ``allowed`` is a
        boolean mask over positions (filters)."""
        return [row for row, _ in self.rank_scored(vector, depth, allowed)]

    def rank_scored(self, vector: Any, depth: int, allowed: Any = None) -> list[tuple[int, float]]:
        """(cache row, cosine distance) nearest first, as ``rank``; the distance (1 - cosine
        similarity) is what a chroma query answers, so corpora merge on one scale."""
        import numpy as np

        if not len(self.rows) or depth < 1:
            return []
        with one_blas_thread():
            scores = self.matrix @ np.asarray(vector, dtype=np.float32)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
            depth = min(depth, int(allowed.sum()))
            if depth == 0:
                return []
        n = min(depth, len(scores))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(self.rows[i]), 1.0 - float(scores[i])) for i in top]
