"""Indexer: source snapshot -> changed files -> chunks -> embeddings -> store.

Incremental: a file whose content hash is unchanged is not touched; a changed file is
re-chunked and only text never embedded before is embedded (EmbeddingCache, per
embedder); files gone upstream are dropped. Indexing with another embedder than the one
that built the corpus re-embeds the stored chunks (nothing is re-chunked, and text the
new embedder saw before comes from the cache) and switches the corpus over when the run
finishes. Safe to kill at any moment (see ``store``): the next run finishes the job.
Binary, huge and non-UTF-8 files are skipped and counted.

A corpus's link-only files (``[files] link_only``) are chunked like the others but neither
embedded nor counted for the lexical index: their chunks are stored apart (``store``) for
the concept links, and a search over the corpus answers exactly as without them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness import envvars

from . import chunkers
from .chunkers.coalesce import coalesce
from .corpus import Chunk, Corpus, arch_tags, language_for
from .corpuscache import CorpusCache, FileEntry
from .embedders.cache import EmbeddingCache
from .embedders.embed import Embedder, reuse_key
from .errors import UserError
from .lexical import ChunkTerms, terms_of
from .links.refresh import refresh as refresh_links
from .progress import Progress
from .sources import Snapshot, Source, SourceFile, iter_wanted
from .store import STORE_FORMAT, CorpusRecord, Store, new_generation

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
    link_only_chunks: int = 0  # chunks kept for the concept links only (never searched)
    embedded: int = 0
    embeddings_reused: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    links: str = ""  # the concept-link table: "kept", "updated" (the changed files') or "built"
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
    terms: list[ChunkTerms]
    link_only: bool = False


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
        arch = file_arch
        if _may_name_an_arch(body):
            arch = tuple(
                sorted(set(file_arch) | set(arch_tags("", body)), key=lambda t: int(t[2:]))
            )
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


# A file's (size, mtime) stands for its content hash only when the mtime is older than
# this at the time it is recorded: a write in the same instant cannot hide behind it.
STAT_TRUST_NS = 2_000_000_000


def _wanted(corpus: Corpus, snapshot: Snapshot, cache: CorpusCache) -> list[SourceFile]:
    """The snapshot's files the corpus takes, the include/exclude globs' answers kept in
    the cache: a re-index asks them only about paths it has not seen (matching every
    path of a big repository against the globs costs more than a one-file update)."""
    globs = json.dumps([list(corpus.include), list(corpus.exclude), list(corpus.link_only)])
    known = cache.wanted_paths(globs)
    if not known and len(snapshot.files) < 500:
        return list(iter_wanted(corpus, snapshot))
    out: list[SourceFile] = []
    new: dict[str, bool] = {}
    for f in snapshot.files:
        yes = known.get(f.path)
        if yes is None:
            yes = new[f.path] = corpus.wants(f.path)
        if yes:
            out.append(f)
    if new:
        cache.remember_wanted(globs, new)
    return out


def _stat(f: SourceFile) -> os.stat_result | None:
    try:
        return f.local.stat()
    except OSError:
        return None


_SM_NUMBER = re.compile(r"sm_?\d")
_ARCH_WORDS = ("ampere", "hopper", "blackwell", "gmma", "tcgen05", "umma")


def _may_name_an_arch(body: str) -> bool:
    """False when ``arch_tags`` cannot find anything in the body (what it reads of it):
    its regex is slow, and most chunks name no architecture."""
    head = body[:3000].lower()
    return bool(_SM_NUMBER.search(head)) or any(w in head for w in _ARCH_WORDS)


# Chunking (and counting terms) runs in worker processes when there are many files: it
# is pure Python and most of an index run's time once embedding is fast.
PARALLEL_MIN_FILES = 64
_JOB: tuple[Corpus, Snapshot, list[tuple[SourceFile, str, str]]] | None = None


def index_workers() -> int:
    """Processes that chunk files (env CTXKERNEL_INDEX_WORKERS; default: the CPUs, at most 4)."""
    forced = envvars.CTXKERNEL_INDEX_WORKERS.get()
    if forced is not None:
        return forced
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def _chunk_one(i: int) -> tuple[list[Chunk], list[ChunkTerms]]:
    assert _JOB is not None
    corpus, snapshot, items = _JOB
    return _chunk_one_of(corpus, snapshot, items[i])


def _quiet_worker() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and ends the pool


def _chunk_all(
    corpus: Corpus,
    snapshot: Snapshot,
    items: list[tuple[SourceFile, str, str]],
    advance: Any,
) -> Iterator[tuple[list[Chunk], list[ChunkTerms]]]:
    """Chunks and term counts of each file, in order; in worker processes (forked, so
    they inherit the job) when there are many files."""
    global _JOB
    import multiprocessing

    workers = index_workers()
    if (
        len(items) < PARALLEL_MIN_FILES
        or workers < 2
        or "fork" not in multiprocessing.get_all_start_methods()
    ):
        for i in range(len(items)):
            yield _chunk_one_of(corpus, snapshot, items[i])
            advance()
        return
    _JOB = (corpus, snapshot, items)
    try:
        with multiprocessing.get_context("fork").Pool(workers, initializer=_quiet_worker) as pool:
            for out in pool.imap(_chunk_one, range(len(items)), chunksize=4):
                yield out
                advance()
    finally:
        _JOB = None


def _chunk_one_of(
    corpus: Corpus, snapshot: Snapshot, item: tuple[SourceFile, str, str]
) -> tuple[list[Chunk], list[ChunkTerms]]:
    f, text, file_hash = item
    chunks = chunk_file(corpus, snapshot, f, text, file_hash)
    if corpus.is_link_only(f.path):
        return chunks, []  # never in the lexical index
    return chunks, [terms_of(c) for c in chunks]


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
    if before is not None and (
        force
        # a chroma collection holds vectors of one size: another embedder starts afresh
        or (not store.local and before.model and before.model != embedder.key)
        # a local store made when vectors lived in chroma: rebuilt (embeddings are reused)
        or (store.local and before.store_format < STORE_FORMAT)
    ):
        store.drop(corpus.name)
        before = None
    cache = store.cache(corpus.name)
    if before is None and cache.exists():
        # a local cache the records do not know (left behind when they were reset): its
        # files would count as unchanged and never reach chroma
        store.drop(corpus.name)
        cache = store.cache(corpus.name)
    if (
        not store.local
        and before is not None
        and before.generation
        and cache.get_info("generation") != before.generation
    ):
        store.rebuild_cache_from_chroma(corpus.name, before)
    known = cache.files()

    report = IndexReport(corpus.name, snapshot.origin, snapshot.version)
    skipped: Counter[str] = Counter()
    if snapshot.skipped_links:
        skipped["symlink_outside_root"] = snapshot.skipped_links
    wanted = _wanted(corpus, snapshot, cache)
    read_task = progress.task(f"{corpus.name}: reading files", len(wanted))
    work: list[_FileWork] = []
    to_chunk: list[tuple[SourceFile, str, str]] = []
    entries: list[FileEntry] = []
    present: set[str] = set()
    stats = {} if force else cache.file_stats()
    seen_stats: list[tuple[str, int, int, str]] = []
    ids: list[tuple[str, int, int, int]] = []  # (path, device, inode, links) of each file kept
    stored_link_only = cache.link_only_paths()
    relocated = 0  # files whose content moved elsewhere on this machine (grep reads them there)
    for f in wanted:
        old = known.get(f.path)
        if old is not None and (f.path in stored_link_only) != corpus.is_link_only(f.path):
            old = None  # moved into or out of the link-only globs: chunked again
        st = _stat(f)
        if st is not None:
            ids.append((f.path, st.st_dev, st.st_ino, st.st_nlink))
        if (
            old is not None
            and st is not None
            and stats.get(f.path) == (st.st_size, st.st_mtime_ns, old.file_hash)
            and old.local == str(f.local)
        ):
            # size and mtime as when its hash was taken: unchanged, and not read again
            read_task.advance()
            present.add(f.path)
            report.files_unchanged += 1
            continue
        text, file_hash, reason = read_text(f, corpus.max_file_bytes)
        read_task.advance()
        if text is None:
            skipped[reason] += 1
            continue
        present.add(f.path)
        if st is not None:
            seen_stats.append((f.path, st.st_size, st.st_mtime_ns, file_hash))
        if old is not None and old.file_hash == file_hash and not force:
            if old.local != str(f.local):
                # the same content somewhere else (another clone, a dir: source): only
                # where it lives changes; re-inserting its chunks would renumber their
                # rows under the lexical and vector snapshots, which are not rebuilt
                cache.set_local(f.path, str(f.local))
                relocated += 1
            report.files_unchanged += 1
            continue
        entries.append(FileEntry(f.path, file_hash, str(f.local), text.count("\n") + 1))
        to_chunk.append((f, text, file_hash))
    read_task.done()
    chunk_task = progress.task(f"{corpus.name}: chunking files", len(to_chunk))
    for entry, (chunks, terms) in zip(
        entries, _chunk_all(corpus, snapshot, to_chunk, chunk_task.advance), strict=True
    ):
        work.append(_FileWork(entry, chunks, terms, corpus.is_link_only(entry.path)))
    chunk_task.done()
    del to_chunk
    t = clock.lap("read+chunk", t)
    removed = sorted(set(known) - present)
    report.files_total = len(present)
    report.files_changed = len(work)
    report.files_removed = len(removed)
    report.skipped = dict(skipped)

    # the last run was stopped part way: what it wrote is in the cache, its files count as
    # unchanged now, and the artifacts made from the whole cache are made again
    interrupted = before is not None and not before.complete
    record = before or CorpusRecord(name=corpus.name)
    record.complete = False
    store.set_record(record)  # marks the run as under way (and creates a server's collection)

    emb_cache = EmbeddingCache(store.index_dir / "embeddings.sqlite")
    filled = 0
    try:
        searched = [w for w in work if not w.link_only]
        t = _write_changes(
            store, corpus.name, searched, embedder, emb_cache, progress, report, clock, t,
            reuse=not force,
        )  # fmt: skip
        link_work = [w for w in work if w.link_only]
        if link_work:
            cache.replace_files(
                [w.entry for w in link_work], [c for w in link_work for c in w.chunks],
                link_only=True,
            )  # fmt: skip
            report.chunks_written += sum(len(w.chunks) for w in link_work)
        if removed:
            stale = cache.chunk_ids_of(removed)
            cache.remove_files(removed)
            store.delete_ids(corpus.name, {i for ids in stale.values() for i in ids})
        if store.local:
            # chunks with no vector of this embedder: all of them after a switch, or the
            # files an interrupted run of another embedder wrote
            filled, t = _fill_vectors(
                cache, corpus.name, embedder, emb_cache, progress, report, clock, t
            )
    finally:
        emb_cache.close()
    # drop chroma records the cache does not know (a run killed between the two writes)
    extra = store.chroma_ids(corpus.name) - cache.all_ids() if not store.local else set()
    store.delete_ids(corpus.name, extra)
    t = clock.lap("store", t)

    # what a search reads moved on only when searched files did (or a file left them for
    # the link-only globs); link-only files alone move the generation (their links) only
    left_search = any(
        w.entry.path in known and w.entry.path not in stored_link_only for w in link_work
    )
    removed_searched = [p for p in removed if p not in stored_link_only]
    search_changed = bool(searched or removed_searched or extra or left_search or interrupted)
    changed = search_changed or bool(work or removed or relocated)
    if search_changed or cache.bm25() is None:
        lex_task = progress.task(f"{corpus.name}: lexical index", None)
        cache.build_bm25()
        lex_task.done()
    t = clock.lap("lexical", t)

    generation = record.generation
    dense = cache.dense() if store.local else None
    dense_changed = store.local and (
        search_changed or filled > 0 or dense is None or dense.embedder != embedder.key
    )
    if changed or dense_changed or before is None:
        generation = new_generation()
    if dense_changed:
        cache.keep_vectors_of(embedder.key)  # the switch (if any) is complete
        cache.export_dense(embedder.key, generation)
    t = clock.lap("dense", t)

    report.chunks_total = cache.count()
    report.link_only_chunks = cache.link_count()
    cache.set_file_stats(seen_stats, older_than_ns=time.time_ns() - STAT_TRUST_NS)
    cache.set_file_ids([i for i in ids if i[0] in present])
    cache.set_info("generation", generation)
    links_task = progress.task(f"{corpus.name}: concept links", None)
    # the changed files' links made again (every link after a forced or interrupted run)
    touched = (
        None if (force or extra or interrupted) else {w.entry.path for w in work} | set(removed)
    )
    report.links = refresh_links(cache, touched)
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
        embedder=embedder.spec,
        dim=_dimension(cache, embedder) if store.local else embedder.dimension,
        recipe=embedder.recipe,
        store_format=STORE_FORMAT,
    )
    store.set_record(record)
    report.seconds = dict(clock.seconds)
    return report


def _dimension(cache: CorpusCache, embedder: Embedder) -> int:
    """The vectors' size, from the stored vectors when there are some: a run that
    embedded nothing need not load a transformer to ask it."""
    dense = cache.dense()
    if dense is not None and len(dense.rows):
        return int(dense.matrix.shape[1])
    return embedder.dimension


def _embed_chunks(
    corpus: str,
    chunks: list[Chunk],
    embedder: Embedder,
    emb_cache: EmbeddingCache,
    progress: Progress,
    report: IndexReport,
    *,
    reuse: bool = True,
) -> dict[str, np.ndarray]:
    """Vectors of ``chunks`` by chunk id: from the embedding cache, else embedded (all of
    them when not ``reuse``: --force re-embeds, and the fresh vectors replace the cached).

    Everything missing is embedded first, in groups ordered by token count (equal-length
    texts in a batch pad nothing); each group lands in the cache at once, so a run killed
    here loses at most one group and the next run reuses the rest.
    """
    texts: dict[str, str] = {}
    keys_of: dict[str, str] = {}
    for c in chunks:
        text = embedder.text_for(c)
        key = reuse_key(c.path, text)
        keys_of[c.id] = key
        texts.setdefault(key, text)
    cached = emb_cache.get_many(embedder.key, texts) if reuse else {}
    missing = [k for k in texts if k not in cached]
    report.embeddings_reused += sum(1 for k in keys_of.values() if k in cached)
    embed_task = progress.task(f"{corpus}: embedding", len(missing))
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
    return {cid: cached[key] for cid, key in keys_of.items()}


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
    """Embed what is missing (see ``_embed_chunks``), then write the files' chunks in
    batches of whole files."""
    import numpy as np

    all_chunks = [c for w in work for c in w.chunks]
    vectors_of = _embed_chunks(
        corpus, all_chunks, embedder, emb_cache, progress, report, reuse=reuse
    )
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
        vectors: np.ndarray | None = (
            np.stack([vectors_of[c.id] for c in chunks]) if chunks else None
        )
        terms = [t for w in batch for t in w.terms]
        if store.local:
            cache.replace_files([w.entry for w in batch], chunks, vectors, embedder.key, terms)
        else:
            old_ids = cache.chunk_ids_of([w.entry.path for w in batch])
            if chunks and vectors is not None:
                store.upsert(corpus, chunks, vectors)
            cache.replace_files([w.entry for w in batch], chunks, terms=terms)
            new_ids = {c.id for c in chunks}
            store.delete_ids(corpus, {i for ids in old_ids.values() for i in ids} - new_ids)
        report.chunks_written += len(chunks)
        write_task.advance(len(batch))
        t = clock.lap("store", t)
        start = end
    write_task.done()
    return t


def _fill_vectors(
    cache: CorpusCache,
    corpus: str,
    embedder: Embedder,
    emb_cache: EmbeddingCache,
    progress: Progress,
    report: IndexReport,
    clock: _Clock,
    t: float,
) -> tuple[int, float]:
    """Give every stored chunk a vector of ``embedder`` (written beside any other
    embedder's, which stay until the run finishes); returns how many were written."""
    import numpy as np

    rows = cache.rows_without_vectors(embedder.key)
    if not rows:
        return 0, t
    for first in range(0, len(rows), EMBED_GROUP * 4):
        part = rows[first : first + EMBED_GROUP * 4]
        by_row = cache.chunks_by_rows(part)
        chunks = [by_row[r] for r in part if r in by_row]
        vectors_of = _embed_chunks(corpus, chunks, embedder, emb_cache, progress, report)
        t = clock.lap("embed", t)
        present = [r for r in part if r in by_row]
        cache.write_vectors(
            embedder.key, present, np.stack([vectors_of[by_row[r].id] for r in present])
        )
        t = clock.lap("store", t)
    return len(rows), t


def _fetch_progress(progress: Progress) -> Any:
    task = None

    def report(stage: str, done: int, total: int) -> None:
        nonlocal task
        if task is None:
            task = progress.task(stage, total or None)
        task.update(description=stage, total=total or None, completed=done)

    return report
