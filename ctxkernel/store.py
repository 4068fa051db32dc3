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

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .corpus import Chunk
from .corpuscache import CorpusCache, FileEntry
from .errors import UserError

if TYPE_CHECKING:
    import numpy as np

RECORD_KEY = "ctxkernel"
COLLECTION_PREFIX = "ck-"
CHROMA_BATCH = 1000
# 2: vectors and term counts in the corpus cache (before: vectors only in chroma)
STORE_FORMAT = 2


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
