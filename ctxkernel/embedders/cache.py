"""EmbeddingCache: vectors kept by reuse key and model, so text that was embedded once
(in this corpus or an earlier run) is never embedded again."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


class EmbeddingCache:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS vectors(model TEXT, key TEXT, vec BLOB, PRIMARY KEY(model, key))"
        )

    def get_many(self, model: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        import numpy as np

        keys = list(dict.fromkeys(keys))
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            q = f"SELECT key, vec FROM vectors WHERE model=? AND key IN ({','.join('?' * len(part))})"
            for key, blob in self._db.execute(q, [model, *part]):
                out[key] = np.frombuffer(blob, dtype=np.float32)
        return out

    def put_many(self, model: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        import numpy as np

        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors(model, key, vec) VALUES(?,?,?)",
                [
                    (model, k, np.asarray(v, dtype=np.float32).tobytes())
                    for k, v in zip(keys, vectors, strict=True)
                ],
            )

    def close(self) -> None:
        self._db.close()
