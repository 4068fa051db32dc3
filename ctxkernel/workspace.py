"""Workspace: one index (store + corpus definitions + searcher) and the operations on
it — index, update, corpora, search, grep, read. The CLI, the agent tools and the MCP
server all hold a Workspace; it loads an embedder once and only when needed (indexing
uses the chosen one; a search uses, per corpus, the one that built the corpus).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import arch as archmod
from . import config, damage
from .confine import Confinement
from .corpus import (
    Corpus,
    corpus_errors,
    get_corpus,
    language_for,
    load_corpora,
    parse_chunk_id,
)
from .docs import DocsResult
from .docs import lookup as docs_lookup
from .embedders.embed import Embedder, get_embedder
from .errors import UserError, check_text
from .grep import GrepResult, grep
from .progress import Progress
from .search import Filters, Searcher, SearchResult
from .store import CorpusRecord, Store

if TYPE_CHECKING:
    from .indexer import IndexReport
    from .related import Related

MAX_READ_LINES = 2000


@dataclass
class CorpusStatus:
    name: str
    description: str
    indexed: bool
    record: CorpusRecord | None = None
    upstream: str | None = None  # the upstream's version now, when it could be asked
    size_bytes: int = 0
    defined: bool = True
    error: str = ""  # why the corpus's definition file does not load, or ""

    @property
    def moved_on(self) -> bool | None:
        if self.record is None or self.upstream is None:
            return None
        return self.upstream != self.record.version

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {
            "type": "corpus",
            "name": self.name,
            "description": self.description,
            "indexed": self.indexed,
            "complete": bool(r and r.complete),
            "source": r.origin if r else "",
            "source_kind": r.source_kind if r else "",
            "version": r.version if r else "",
            "indexed_at": _iso(r.indexed_at) if r and r.indexed_at else None,
            "files": r.files if r else 0,
            "chunks": r.chunks if r else 0,
            "skipped": r.skipped if r else {},
            "model": r.model if r else "",
            "embedder": r.embedder if r else "",
            "dim": r.dim if r else 0,
            "size_bytes": self.size_bytes,
            "upstream_version": self.upstream,
            "upstream_moved": self.moved_on,
            "defined": self.defined,
            "error": self.error,
        }


@dataclass
class FileRange:
    corpus: str
    path: str
    start_line: int
    end_line: int
    lines: list[str]
    total_lines: int
    url: str
    language: str
    source: str = "file"  # "file" (read from disk) or "chunks" (rebuilt from the index)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "file",
            "id": f"{self.corpus}:{self.path}:{self.start_line}-{self.end_line}",
            "corpus": self.corpus,
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "total_lines": self.total_lines,
            "url": self.url,
            "language": self.language,
            "text": "\n".join(self.lines),
            "from": self.source,
        }


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class Workspace:
    def __init__(
        self,
        index_dir: str | Path | None = None,
        chroma_url: str | None = None,
        embed: str | None = None,
    ) -> None:
        """``embed``: the embedder to index with ("static", "minilm" or a model directory;
        default from env CTXKERNEL_EMBED or config.toml, else static). Given here, a search
        also insists on it: a corpus built with another one is an error."""
        self.settings = config.resolve(index_dir, chroma_url)
        self.store = Store(self.settings.index_dir, self.settings.chroma_url)
        self._embed = embed
        self._embedder: Embedder | None = None
        self._arch_resolver: archmod.Resolver | None = None
        self._searcher: Searcher | None = None

    @property
    def embedder(self) -> Embedder:
        """The embedder index runs use."""
        if self._embedder is None:
            self._embedder = get_embedder(self._embed, self.settings.embed)
        return self._embedder

    @property
    def searcher(self) -> Searcher:
        if self._searcher is None:
            self._searcher = Searcher(self.store, self.embedder if self._embed else None)
        return self._searcher

    # --- corpora ---
    def definitions(self) -> dict[str, Corpus]:
        return load_corpora()

    def corpus(self, name: str) -> Corpus:
        return get_corpus(name)

    def index(
        self,
        name: str,
        source: str | None = None,
        ref: str = "",
        progress: Progress | None = None,
        force: bool = False,
        rebuild: bool = False,
    ) -> IndexReport:
        """Index ``name`` from ``source`` (default: the corpus's own). ``force`` re-chunks
        and re-embeds everything (the embedding cache is not used); ``rebuild`` drops the
        corpus's index first, setting aside whatever of the store is damaged, and builds it
        again, reusing cached vectors."""
        from .indexer import index_corpus  # chunkers, sources: only when indexing
        from .sources import resolve_source

        check_text(name, "corpus")
        corpus = self.corpus(name)
        src = resolve_source(corpus, source, ref)
        with damage.guard(self.store, [name], indexing=True):
            notes = damage.clear_for_rebuild(self.store, name) if rebuild else []
            report = index_corpus(self.store, corpus, src, self.embedder, progress, force=force)
        report.notes[:0] = notes
        return report

    def update(self, name: str, progress: Progress | None = None) -> IndexReport:
        from .indexer import index_corpus
        from .sources import source_from_record

        corpus = self.corpus(name)
        with damage.guard(self.store, [name], indexing=True):
            record = self.store.record(name)
            if record is None or not record.origin:
                raise UserError(
                    f"corpus {name!r} is not indexed yet; run `ctxkernel index {name}` first"
                )
            src = source_from_record(corpus, record.source_kind, record.origin)
            return index_corpus(self.store, corpus, src, self.embedder, progress)

    def status(self, check_upstream: bool = True) -> list[CorpusStatus]:
        with damage.guard(self.store):
            return self._status(check_upstream)

    def _status(self, check_upstream: bool) -> list[CorpusStatus]:
        from .sources import source_from_record

        defs = self.definitions()
        errors = corpus_errors()
        indexed = set(self.store.corpora())
        out: list[CorpusStatus] = []
        for name in sorted(set(defs) | indexed | set(errors)):
            corpus = defs.get(name)
            record = self.store.record(name) if name in indexed else None
            status = CorpusStatus(
                name=name,
                description=corpus.description if corpus else "",
                indexed=record is not None,
                record=record,
                defined=corpus is not None,
                error=errors.get(name, "") if corpus is None else "",
            )
            if record is not None:
                status.size_bytes = _dir_size(self.store.index_dir / "lexical" / name)
                if check_upstream and corpus is not None and record.origin:
                    try:
                        status.upstream = source_from_record(
                            corpus, record.source_kind, record.origin
                        ).upstream_version()
                    except UserError:
                        status.upstream = None
            out.append(status)
        return out

    def _resolver(self) -> archmod.Resolver:
        """One for the workspace's life: a warm server labels the same sections again."""
        if self._arch_resolver is None:
            self._arch_resolver = archmod.Resolver(self.store)
        return self._arch_resolver

    # --- queries ---
    def search(
        self,
        query: str,
        corpora: list[str] | None = None,
        k: int = 10,
        mode: str = "hybrid",
        path: str | None = None,
        language: str | None = None,
        kind: str | None = None,
        rerank: bool = False,
        rerank_model: str | None = None,
        arch: str | None = None,
    ) -> SearchResult:
        """Search; ``rerank`` re-scores the best fused candidates with a local
        cross-encoder (``rerank.py``) before the cut at ``k``; ``arch`` (``sm_90``) drops
        hits the target cannot run (``arch.py``) and labels the others."""
        _check_texts(query=query, path=path, language=language, kind=kind, arch=arch)
        _check_texts(*(corpora or []), what="corpus")
        target = archmod.parse_target(arch) if arch else None
        with damage.guard(self.store, corpora):
            needs = self._resolver()
            # ask for more with a target, so what it keeps still fills k
            want = k if target is None else k * 4
            args = (want, mode, path, language, kind, rerank, rerank_model)
            try:
                result = self._search(query, corpora, *args)
            except (UserError, KeyboardInterrupt, MemoryError):
                raise
            except Exception as exc:
                result = self._search_undamaged(exc, query, corpora, *args)
            if target is not None:
                result.hits = [h for h in result.hits if archmod.accepts(h.chunk, target, needs)]
                result.hits = result.hits[:k]
                for i, h in enumerate(result.hits, 1):
                    h.rank = i
            for h in result.hits:
                h.extra.setdefault("requires", archmod.label(h.chunk, needs))
        return result

    def _search_undamaged(
        self, failure: Exception, query: str, corpora: list[str] | None, *args: Any
    ) -> SearchResult:
        """After a search of every corpus failed: the same search over the corpora whose
        index is whole, naming the others (``SearchResult.skipped``), so one damaged
        corpus costs only its own answers. Raises the failure again when the corpora were
        chosen, or when none is damaged (then it is not the index's fault) or all are."""
        if corpora:
            raise failure
        indexed = self.store.corpora()
        broken = damage.damaged(self.store, indexed)
        whole = [c for c in indexed if c not in broken]
        if not broken or not whole:
            raise failure
        result = self._search(query, whole, *args)
        result.skipped = broken
        return result

    def _search(
        self,
        query: str,
        corpora: list[str] | None,
        k: int,
        mode: str,
        path: str | None,
        language: str | None,
        kind: str | None,
        rerank: bool,
        rerank_model: str | None,
    ) -> SearchResult:
        filters = Filters(path=path, language=language, kind=kind)
        if not rerank:
            return self.searcher.search(query, corpora, k, mode, filters)
        from .rerank import RERANK_POOL, rerank_hits, resolve_rerank_model

        resolve_rerank_model(rerank_model)  # a missing model fails before the search
        t0 = time.perf_counter()
        result = self.searcher.search(query, corpora, max(k * 3, RERANK_POOL), mode, filters)
        result.hits = rerank_hits(query, result.hits, k, rerank_model)
        result.timings["rerank_ms"] = round((time.perf_counter() - t0) * 1000 - result.took_ms, 1)
        result.took_ms = (time.perf_counter() - t0) * 1000
        result.mode = f"{mode}+rerank"
        return result

    def docs(
        self,
        topic: str,
        corpora: list[str] | None = None,
        alternatives: int = 5,
        arch: str | None = None,
        links: bool = True,
    ) -> DocsResult:
        """The section or definition documenting ``topic`` (an instruction, API or name),
        with what implements and uses it in the other corpora (``links``); ``arch``
        drops what the target cannot run."""
        _check_texts(topic=topic, arch=arch)
        target = archmod.parse_target(arch) if arch else None
        _check_texts(*(corpora or []), what="corpus")
        if not topic.strip():
            raise UserError("empty docs topic")
        names = corpora or self.store.corpora()
        if not names:
            raise UserError("nothing is indexed yet; run `ctxkernel index NAME` first")
        for name in names:
            if name not in self.store.corpora():
                raise UserError(
                    f"corpus {name!r} is not indexed (indexed: {', '.join(self.store.corpora())})"
                )
        with damage.guard(self.store, names):
            result = docs_lookup(
                self.store,
                topic,
                names,
                alternatives + (10 if target else 0),
                explicit=bool(corpora),
            )
            if target is not None:
                _keep_runnable(result, target, alternatives, archmod.Resolver(self.store))
                result.arch = f"sm_{target}"
            if links and result.best is not None:
                from .related import docs_links

                result.links, result.links_total = docs_links(self.store, result, target)
            return result

    def related(self, ref: str, arch: str | None = None) -> Related:
        """From any hit id: its definition, the PTX section it implements, the other
        wrappers of that instruction, its callers and sibling examples."""
        from .related import related

        check_text(ref, "reference")
        _check_texts(arch=arch)
        target = archmod.parse_target(arch) if arch else None
        corpus = parse_chunk_id(ref)[0]
        with damage.guard(self.store, [corpus]):
            return related(self.store, ref, target)

    def grep(self, corpus: str, pattern: str, **kwargs: Any) -> GrepResult:
        _check_texts(corpus=corpus, pattern=pattern, path=kwargs.get("path_glob"))
        with damage.guard(self.store, [corpus]):
            return grep(self.store, corpus, pattern, **kwargs)

    def read(self, ref: str, start: int | None = None, end: int | None = None) -> FileRange:
        """Lines of an indexed file: ``corpus:path[:start-end]``."""
        check_text(ref, "reference")
        corpus = parse_chunk_id(ref)[0]
        with damage.guard(self.store, [corpus]):
            return self._read(ref, start, end)

    def _read(self, ref: str, start: int | None, end: int | None) -> FileRange:
        corpus, path, s, e = parse_chunk_id(ref)
        start = start if start is not None else s
        end = end if end is not None else e
        if corpus not in self.store.corpora():
            have = ", ".join(self.store.corpora()) or "none"
            raise UserError(f"corpus {corpus!r} is not indexed (indexed: {have})")
        cache = self.store.synced_cache(corpus)
        entry = cache.file(path)
        if entry is None:
            raise UserError(
                f"{corpus}:{path} is not an indexed file (try `ctxkernel search` or `grep` to find paths)"
            )
        key = (str(self.store.index_dir), corpus, cache.get_info("generation") or "")
        confined = Confinement.for_corpus(
            key, {p: e.local for p, e in cache.files().items()}, cache.file_ids([path])
        )
        lines, source = _file_lines(confined, entry.local, f"{corpus}:{path}")
        if lines is None:
            lines, source = _lines_from_chunks(cache.chunks_of_file(path)), "chunks"
        total = len(lines)
        start = start or 1
        end = end or min(total, start + MAX_READ_LINES - 1)
        if start > total:
            raise UserError(f"bad range {start}-{end}: {corpus}:{path} has {total} lines")
        end = min(end, total)
        corpus_def = load_corpora().get(corpus)
        record = self.store.record(corpus)
        url = (
            corpus_def.link(ref=record.ref if record else "", path=path, start=start, end=end)
            if corpus_def
            else ""
        )
        return FileRange(
            corpus, path, start, end, lines[start - 1 : end], total, url, language_for(path), source
        )


def _keep_runnable(
    result: DocsResult, target: int, alternatives: int, needs: archmod.Resolver
) -> None:
    """Drop the answers ``target`` cannot run. When the best one goes, there is no best:
    what the target can run instead is a different thing, listed as an alternative. A
    name that says its own target (``tcgen05.mma``) has no answer on another one, even
    where no indexed section states it (the ptx corpus not indexed)."""
    best = result.best
    kept = [h for h in result.alternatives if archmod.accepts(h.chunk, target, needs)]
    result.alternatives = kept[:alternatives]
    named = archmod.of_name(result.topic)
    if named is not None and not named.runs_on(target):
        said = f"{result.topic} needs {named.label()}: sm_{target} cannot run it"
        result.hint = f"{said}; {result.hint}" if result.hint else said
        result.best = None
        result.how = "none"
    elif best is not None and not archmod.accepts(best.chunk, target, needs):
        need = archmod.label(best.chunk, needs)
        result.hint = f"{result.topic} needs {need}: sm_{target} cannot run it"
        result.best = None
        result.how = "none"


def _check_texts(*values: str, what: str = "", **named: str | None) -> None:
    for value in values:
        check_text(value, what)
    for name, given in named.items():
        if given is not None:
            check_text(given, name)


def _file_lines(confined: Confinement, local: str, what: str) -> tuple[list[str] | None, str]:
    """The lines of a recorded file's copy on disk; (None, "") when it is gone; Refused
    when it now leads out of the corpus snapshot."""
    if not local:
        return None, ""
    data = confined.read_bytes(local, what)
    if data is None:
        return None, ""
    return data.decode("utf-8", "replace").splitlines(), "file"


def _lines_from_chunks(chunks: list[Any]) -> list[str]:
    lines: list[str] = []
    for c in chunks:
        while len(lines) < c.start_line - 1:
            lines.append("")
        body = c.text.splitlines()
        for i, text in enumerate(body):
            n = c.start_line + i
            if n <= len(lines):
                continue
            lines.append(text)
    return lines


def _dir_size(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
