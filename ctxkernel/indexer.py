"""Indexer: source snapshot -> changed files -> chunks -> embeddings -> store.

Incremental: a file whose content hash is unchanged is not touched; a changed file is
re-chunked and only text never embedded before is embedded (EmbeddingCache); files
gone upstream are dropped. Safe to kill at any moment (see ``store``): the next run
finishes the job. Binary, huge and non-UTF-8 files are skipped and counted.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import chunkers, links
from .chunkers.coalesce import coalesce
from .corpus import Chunk, Corpus, arch_tags, language_for
from .embed import Embedder, embed_text, reuse_key
from .embedcache import EmbeddingCache
from .errors import UserError
from .progress import Progress
from .sources import Snapshot, Source, SourceFile, iter_wanted
from .store import CorpusRecord, FileEntry, Store, new_generation

if TYPE_CHECKING:
    import numpy as np

BATCH_CHUNKS = 512
EMBED_GROUP = 2048  # texts embedded (and cached) together, in token-count order


@dataclass
class IndexReport:
    corpus: str
    origin: str
    version: str
    files_total: int = 0
    files_changed: int = 0
    files_removed: int = 0
    files_unchanged: int = 0
    chunks_total: int = 0
    chunks_written: int = 0
    embedded: int = 0
    embeddings_reused: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # repairs made on the way, for people

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["type"] = "summary"
        data["seconds"] = {k: round(v, 3) for k, v in self.seconds.items()}
        return data


@dataclass
class _FileWork:
    entry: FileEntry
    chunks: list[Chunk]


class _Clock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def lap(self, stage: str, since: float) -> float:
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - since
        return now


def read_text(f: SourceFile, max_bytes: int) -> tuple[str | None, str, str]:
    """(text or None, file hash, skip reason)."""
    try:
        size = f.local.stat().st_size
        if size > max_bytes:
            return None, "", "huge"
        data = f.local.read_bytes()
    except OSError:
        return None, "", "unreadable"
    if b"\0" in data[:8192]:
        return None, "", "binary"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "", "non_utf8"
    return text, hashlib.sha1(data).hexdigest(), ""


def chunk_file(
    corpus: Corpus, snapshot: Snapshot, f: SourceFile, text: str, file_hash: str
) -> list[Chunk]:
    name = corpus.chunker_for(f.path)
    try:
        pieces = chunkers.get_chunker(name)(text, f.path, corpus.max_lines)
    except Exception:  # a chunker bug must not lose the file: fall back to line windows
        pieces = chunkers.get_chunker("lines")(text, f.path, corpus.max_lines)
    pieces = coalesce(pieces, corpus.min_lines, max(corpus.min_lines, corpus.target_lines))
    lines = text.splitlines()
    language = language_for(f.path)
    kind = corpus.kind_for(f.path)
    file_arch = arch_tags(f.path)
    out: list[Chunk] = []
    for p in pieces:
        body = p.body(lines)
        if not body.strip():
            continue
        anchor = p.anchor
        if corpus.doc_url and language == "markdown" and p.title:
            anchor = _converted_doc_anchor(corpus.doc_url, body, p.title)
        url = corpus.link(
            ref=snapshot.ref, path=f.path, start=p.start_line, end=p.end_line, anchor=anchor
        )
        arch = tuple(sorted(set(file_arch) | set(arch_tags("", body)), key=lambda t: int(t[2:])))
        out.append(
            Chunk(
                corpus=corpus.name,
                path=f.path,
                start_line=p.start_line,
                end_line=p.end_line,
                text=body,
                symbol=p.symbol,
                title=p.title,
                doc=p.doc,
                anchor=anchor,
                defines=tuple(p.defines),
                language=language,
                kind=kind,
                arch=arch,
                commit=snapshot.version,
                url=url,
                file_hash=file_hash,
            )
        )
    # ids must be unique: two pieces with the same range (rare) keep the first
    seen: set[str] = set()
    unique = []
    for c in out:
        if c.id not in seen:
            seen.add(c.id)
            unique.append(c)
    return unique


_DOC_LINK = re.compile(r"\]\((https?://[^)\s#]+)#([A-Za-z0-9_.:%-]+)")


def _converted_doc_anchor(doc_url: str, body: str, title: str) -> str:
    """The upstream anchor of a section of a Markdown conversion of a docs page.

    Conversions often keep the page's own heading links (``[Title](https://…/#anchor)``):
    use that anchor when it points at the corpus's page. Otherwise a text fragment
    (``#:~:text=Title``), which browsers scroll to.
    """
    host = urllib.parse.urlparse(doc_url).netloc
    for line in body.splitlines()[:6]:
        for match in _DOC_LINK.finditer(line):
            if urllib.parse.urlparse(match.group(1)).netloc == host:
                return "#" + match.group(2)
    return "#:~:text=" + urllib.parse.quote(title.strip("# ").split(" (part")[0])


def index_corpus(
    store: Store,
    corpus: Corpus,
    source: Source,
    embedder: Embedder,
    progress: Progress | None = None,
    *,
    force: bool = False,
) -> IndexReport:
    """Bring the store's copy of ``corpus`` up to date with ``source``.

    One run per corpus and index at a time: a second one fails fast instead of
    interleaving its writes with the first.
    """
    with _corpus_lock(store, corpus.name):
        return _index_corpus(store, corpus, source, embedder, progress or Progress(), force=force)


@contextmanager
def _corpus_lock(store: Store, name: str) -> Iterator[None]:
    import fcntl

    folder = store.index_dir / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise UserError(
                f"another index run of {name!r} is in progress ({holder}); wait for it or stop it"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _index_corpus(
    store: Store,
    corpus: Corpus,
    source: Source,
    embedder: Embedder,
    progress: Progress,
    *,
    force: bool,
) -> IndexReport:
    clock = _Clock()
    t = time.perf_counter()
    snapshot = source.materialize(_fetch_progress(progress))
    t = clock.lap("fetch", t)

    before = store.record(corpus.name)
    if before is not None and (force or (before.model and before.model != embedder.key)):
        store.drop(corpus.name)
        before = None
    cache = store.cache(corpus.name)
    if before is None and cache.exists():
        # a local cache the records do not know (left behind when they were reset): its
        # files would count as unchanged and never reach chroma
        store.drop(corpus.name)
        cache = store.cache(corpus.name)
    if (
        before is not None
        and before.generation
        and cache.get_info("generation") != before.generation
    ):
        store.rebuild_cache_from_chroma(corpus.name, before)
    known = cache.files()

    report = IndexReport(corpus.name, snapshot.origin, snapshot.version)
    skipped: Counter[str] = Counter()
    if snapshot.skipped_links:
        skipped["symlink_outside_root"] = snapshot.skipped_links
    wanted = list(iter_wanted(corpus, snapshot))
    read_task = progress.task(f"{corpus.name}: reading files", len(wanted))
    work: list[_FileWork] = []
    present: set[str] = set()
    for f in wanted:
        text, file_hash, reason = read_text(f, corpus.max_file_bytes)
        read_task.advance()
        if text is None:
            skipped[reason] += 1
            continue
        present.add(f.path)
        old = known.get(f.path)
        if old is not None and old.file_hash == file_hash and not force:
            if old.local != str(f.local):
                cache.replace_files(
                    [FileEntry(f.path, file_hash, str(f.local), old.lines)],
                    cache.chunks_of_file(f.path),
                )
            report.files_unchanged += 1
            continue
        entry = FileEntry(f.path, file_hash, str(f.local), text.count("\n") + 1)
        work.append(_FileWork(entry, chunk_file(corpus, snapshot, f, text, file_hash)))
    read_task.done()
    t = clock.lap("read+chunk", t)
    removed = sorted(set(known) - present)
    report.files_total = len(present)
    report.files_changed = len(work)
    report.files_removed = len(removed)
    report.skipped = dict(skipped)

    record = before or CorpusRecord(name=corpus.name)
    record.complete = False
    store.set_record(record)  # creates the collection; marks the run as under way

    emb_cache = EmbeddingCache(store.index_dir / "embeddings.sqlite")
    try:
        t = _write_changes(
            store, corpus.name, work, embedder, emb_cache, progress, report, clock, t,
            reuse=not force,
        )  # fmt: skip
    finally:
        emb_cache.close()

    if removed:
        stale = cache.chunk_ids_of(removed)
        cache.remove_files(removed)
        store.delete_ids(corpus.name, {i for ids in stale.values() for i in ids})
    # drop chroma records the cache does not know (a run killed between the two writes)
    extra = store.chroma_ids(corpus.name) - cache.all_ids()
    store.delete_ids(corpus.name, extra)
    t = clock.lap("store", t)

    changed = bool(work or removed or extra) or cache.bm25() is None
    if changed:
        lex_task = progress.task(f"{corpus.name}: lexical index", None)
        cache.build_bm25()
        lex_task.done()
    t = clock.lap("lexical", t)

    report.chunks_total = cache.count()
    generation = new_generation() if changed or before is None else record.generation
    cache.set_info("generation", generation)
    links_task = progress.task(f"{corpus.name}: concept links", None)
    links.table(cache).close()  # rebuilt when the generation moved on
    links_task.done()
    t = clock.lap("links", t)
    record = CorpusRecord(
        name=corpus.name,
        source_kind=snapshot.kind,
        origin=snapshot.origin,
        version=snapshot.version,
        ref=snapshot.ref,
        indexed_at=time.time(),
        files=report.files_total,
        chunks=report.chunks_total,
        skipped=report.skipped,
        model=embedder.key,
        generation=generation,
        complete=True,
        seconds=round(sum(clock.seconds.values()), 2),
    )
    store.set_record(record)
    report.seconds = dict(clock.seconds)
    return report


def _write_changes(
    store: Store,
    corpus: str,
    work: list[_FileWork],
    embedder: Embedder,
    emb_cache: EmbeddingCache,
    progress: Progress,
    report: IndexReport,
    clock: _Clock,
    t: float,
    *,
    reuse: bool = True,
) -> float:
    """Embed what is missing (everything when not ``reuse``: --force re-embeds, and the
    fresh vectors replace the cached ones), then write the files' chunks in batches."""
    import numpy as np

    texts: dict[str, str] = {}
    keys_of: dict[str, str] = {}
    for w in work:
        for c in w.chunks:
            text = embed_text(c)
            key = reuse_key(c.path, text)
            keys_of[c.id] = key
            texts.setdefault(key, text)
    cached = emb_cache.get_many(embedder.key, texts) if reuse else {}
    missing = [k for k in texts if k not in cached]
    report.embeddings_reused = sum(1 for k in keys_of.values() if k in cached)
    t = clock.lap("embed-lookup", t)
    embed_task = progress.task(f"{corpus}: embedding", len(missing))
    # Embed everything missing first, in groups ordered by token count (equal-length
    # texts in a batch pad nothing); each group lands in the embedding cache at once,
    # so a run killed here loses at most one group and the next run reuses the rest.
    if missing:
        tokens = dict(
            zip(missing, embedder.token_lengths([texts[k] for k in missing]), strict=True)
        )
        ordered = sorted(missing, key=lambda k: (tokens[k], k))
        for first in range(0, len(ordered), EMBED_GROUP):
            group = ordered[first : first + EMBED_GROUP]
            vecs = embedder.embed(
                [texts[k] for k in group],
                progress=embed_task.advance,
                lengths=[tokens[k] for k in group],
            )
            emb_cache.put_many(embedder.key, group, vecs)
            cached.update(zip(group, vecs, strict=True))
            report.embedded += len(group)
    embed_task.done()
    t = clock.lap("embed", t)
    write_task = progress.task(f"{corpus}: writing files", len(work))
    cache = store.cache(corpus)
    start = 0
    while start < len(work):
        # a batch of whole files, about BATCH_CHUNKS chunks
        end, n = start, 0
        while end < len(work) and (n == 0 or n + len(work[end].chunks) <= BATCH_CHUNKS):
            n += len(work[end].chunks)
            end += 1
        batch = work[start:end]
        chunks = [c for w in batch for c in w.chunks]
        vectors: np.ndarray = (
            np.stack([cached[keys_of[c.id]] for c in chunks])
            if chunks
            else np.zeros((0, 384), np.float32)
        )
        old_ids = cache.chunk_ids_of([w.entry.path for w in batch])
        if chunks:
            store.upsert(corpus, chunks, vectors)
        cache.replace_files([w.entry for w in batch], chunks)
        new_ids = {c.id for c in chunks}
        store.delete_ids(corpus, {i for ids in old_ids.values() for i in ids} - new_ids)
        report.chunks_written += len(chunks)
        write_task.advance(len(batch))
        t = clock.lap("store", t)
        start = end
    write_task.done()
    return t


def _fetch_progress(progress: Progress) -> Any:
    task = None

    def report(stage: str, done: int, total: int) -> None:
        nonlocal task
        if task is None:
            task = progress.task(stage, total or None)
        task.update(description=stage, total=total or None, completed=done)

    return report
