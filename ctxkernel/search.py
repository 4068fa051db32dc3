"""Searcher: hybrid retrieval over the store — BM25 over whole chunks (kernel-aware
tokens), dense vectors over chunk summaries, and exact symbol matches — fused with
reciprocal-rank fusion; filters by corpus, path glob, language and kind.
"""

from __future__ import annotations

import copy
import fnmatch
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from . import errortext, hubs, pastedpaths, pathrank, querytext, raises, symbols
from .corpus import Chunk, Hit
from .corpuscache import CorpusCache
from .embedders.embed import Embedder, embedder_for_record, get_embedder
from .errors import UserError
from .hitlist import merge_adjacent, spread
from .store import STORE_FORMAT, Store
from .tokenize import identifiers, tokenize

MODES = ("hybrid", "lexical", "dense")
RRF_K = 20


@dataclass
class Filters:
    path: str | None = None  # glob on the upstream path
    language: str | None = None
    kind: str | None = None

    def where(self) -> dict[str, Any] | None:
        clauses: list[dict[str, Any]] = []
        if self.language:
            clauses.append({"language": self.language})
        if self.kind:
            clauses.append({"kind": self.kind})
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}

    def accepts(self, chunk: Chunk) -> bool:
        if self.language and chunk.language != self.language:
            return False
        if self.kind and chunk.kind != self.kind:
            return False
        return not (self.path and not fnmatch.fnmatchcase(chunk.path, self.path))


@dataclass
class Weights:
    """How much each ranked list counts in the fusion (reciprocal-rank fusion weights)."""

    body: float = 1.0  # BM25 over chunk text
    head: float = 1.0  # BM25 over symbol, title, defined names, file name
    file: float = 1.5  # BM25 over whole files, through each file's best chunk
    dense: float = 1.5  # embedding similarity of chunk summaries (a transformer's vectors)
    dense_static: float = 1.0  # the same with static vectors: a blunter ranking, counted less
    symbol: float = 1.5  # chunks that define a name the query spells out
    raises: float = 3.0  # chunks whose statement raises the pasted error message
    pasted_paths: float = 1.5  # chunks of library files a pasted error's paths name (0: off)
    path: float = 0.5  # files whose folder and file names hold the query's words
    path_in_example: float = 2.0  # ... when the query asks for an example
    head_in_prose: float = 0.5  # head counts less for plain-words queries: titles repeat words


@dataclass
class SearchResult:
    hits: list[Hit]
    took_ms: float
    mode: str
    corpora: list[str]
    timings: dict[str, float] = field(default_factory=dict)
    # corpora left out of a search of every corpus: name -> what is damaged, the repair
    skipped: dict[str, str] = field(default_factory=dict)


class Searcher:
    """Holds the store, the embedders (loaded once, lazily) and the per-corpus caches.

    A corpus's query vector comes from the embedder that built it (its record says which);
    an ``embedder`` given here is a requirement: a corpus built with another is an error.
    """

    def __init__(
        self, store: Store, embedder: Embedder | None = None, weights: Weights | None = None
    ) -> None:
        self.store = store
        self._embedder = embedder
        self._by_key: dict[str, Embedder] = {embedder.key: embedder} if embedder else {}
        self.weights = weights or Weights()
        self.chunks = ChunkMemo()

    @property
    def embedder(self) -> Embedder:
        """The required embedder, else the default one."""
        if self._embedder is None:
            self._embedder = get_embedder()
            self._by_key.setdefault(self._embedder.key, self._embedder)
        return self._embedder

    def embedder_for(self, corpus: str) -> Embedder:
        """The embedder whose vectors the corpus holds."""
        record = self.store.record(corpus)
        if record is None or not record.model:
            return self.embedder
        if self.store.local and record.store_format < STORE_FORMAT:
            raise UserError(
                f"corpus {corpus!r} was indexed by an older ctxkernel (vectors in chroma); "
                f"run `ctxkernel index {corpus}` to move it to the current store "
                "(its embeddings are reused)"
            )
        if self._embedder is not None and record.model != self._embedder.key:
            raise UserError(
                f"corpus {corpus!r} was embedded with {record.model}, not {self._embedder.key}; "
                f"search it without --embed, or re-index it with this embedder "
                f"(`ctxkernel index {corpus} --embed {self._embedder.spec}`)"
            )
        found = self._by_key.get(record.model)
        if found is None:
            found = embedder_for_record(record.embedder, record.model, record.recipe)
            self._by_key[record.model] = found
        return found

    def warm(self, corpora: Sequence[str] | None = None) -> None:
        """Load the embedders of these corpora (default: all indexed) and their snapshots."""
        for name in corpora or self.indexed():
            self.embedder_for(name).embed_query("warm up")

    def indexed(self) -> list[str]:
        return self.store.corpora()

    def _corpora(self, names: Sequence[str] | None) -> list[str]:
        indexed = self.indexed()
        if not names:
            if not indexed:
                raise UserError("nothing is indexed yet; run `ctxkernel index NAME` first")
            return indexed
        for name in names:
            if name not in indexed:
                have = ", ".join(indexed) or "none"
                raise UserError(
                    f"corpus {name!r} is not indexed (indexed: {have}); run `ctxkernel index {name}`"
                )
        return list(names)

    def search(
        self,
        query: str,
        corpora: Sequence[str] | None = None,
        k: int = 10,
        mode: str = "hybrid",
        filters: Filters | None = None,
    ) -> SearchResult:
        if mode not in MODES:
            raise UserError(f"unknown search mode {mode!r} (one of {', '.join(MODES)})")
        if not query.strip():
            raise UserError("empty query")
        if k < 1:
            raise UserError("-k must be at least 1")
        filters = filters or Filters()
        names = self._corpora(corpora)
        t0 = time.perf_counter()
        timings: dict[str, float] = {}
        depth = max(RANKER_DEPTH, k * 5)  # fixed up to k=12: top-5 is the head of top-10
        lists: list[tuple[float, list[tuple[str, int]]]] = []  # (weight, [(corpus, row)])
        sharp: list[tuple[float, list[tuple[str, int]]]] = []  # lists whose order must hold
        caches = {name: self.store.synced_cache(name) for name in names}
        # a pasted error is searched by its message: the exception type, the compiler's
        # location and quotes are wrapping no source line holds
        message = querytext.error_message(query)
        text = message or query
        if message:
            # a question in the user's words around the paste: those words name what
            # the message alone does not (the call, the API), so both are searched
            own = errortext.own_words(query)
            if OWN_WORDS_MIN and len(own.split()) >= OWN_WORDS_MIN:
                text = f"{own} {message}"
        # a message pasted bare (no type, no location), alone or on a line of its own
        # among the user's sentences, is read for raise sites too, but only a site that
        # accounts for most of it leads: plain phrases read like this
        bares: list[str] = []
        if message is None and BARE_MIN_SHARE < 1.0 and not is_name_query(query):
            bares = errortext.bare_candidates(query)
        said_texts = [message] if message else bares
        example = querytext.wants_example(query)
        whole_file = querytext.seeks_file(query)  # an example to start from, not a passage
        # a file asked for as a whole, by a question naming no code: the files the
        # whole-file ranking finds stand in by their openings (``FILE_OPENING``)
        opening = FILE_OPENING if whole_file and not querytext.names_code(query) else 0.0
        teach = (
            TEACH_BOOST != 1.0
            and querytext.asks_how(query)
            and (not TEACH_PLAIN_ONLY or querytext.plain_words(query))
        )
        # per message read, the body matches its raise sites are read from
        pools: list[tuple[str, list[tuple[float, str, int]]]] = []
        # Each ranker gives one list over all the corpora, merged by its score (BM25,
        # cosine distance, definition order), so a corpus's place in it is earned: a
        # tiny corpus's weak best match no longer ranks with a big corpus's best one.
        if mode in ("hybrid", "lexical"):
            t = time.perf_counter()
            tokens = tokenize(text)
            name_query = is_name_query(query)
            by_field: dict[str, list[tuple[float, str, int]]] = {}
            shared = _shared_idf(caches, tokens) if len(caches) > 1 else {}
            for name, cache in caches.items():
                scored_fields = _lexical_scored(
                    cache, tokens, depth, filters, shared.get(name), opening
                )
                for fieldname, scored in scored_fields.items():
                    by_field.setdefault(fieldname, []).extend((s, name, r) for r, s in scored)
            for said_text in said_texts if mode == "hybrid" else []:
                # the raise sites are read from the chunks whose text holds the message
                said = tokenize(said_text) if text != said_text else tokens
                said_idf = (
                    _shared_idf(caches, said, ("body",))
                    if len(caches) > 1 and said is not tokens
                    else shared
                )
                # a line of a question read as a bare message: its site, if it has one,
                # holds all its words and is among its best body matches
                size = RAISE_POOL if said_text is message or len(bares) < 2 else BARE_LINE_POOL
                pool: list[tuple[float, str, int]] = []
                for name, cache in caches.items():
                    weights = said_idf.get(name, {}).get("body")
                    pool.extend(_body_pool(cache, said, size, filters, weights))
                pools.append((said_text, sorted(pool, key=lambda e: -e[0])[:size]))
            for fieldname, entries in by_field.items():
                weight = getattr(self.weights, fieldname)
                if fieldname == "head" and not name_query:
                    weight *= self.weights.head_in_prose
                if weight and entries:
                    lists.append((weight, _best_first(entries, depth, reverse=True)))
            timings["lexical_ms"] = (time.perf_counter() - t) * 1000
        if mode in ("hybrid", "dense"):
            t = time.perf_counter()
            # one query vector per embedder: corpora built with different ones each get theirs
            embedders = {name: self.embedder_for(name) for name in caches}
            by_key = {e.key: e for e in embedders.values()}
            vectors = {key: query_vector(e, text) for key, e in by_key.items()}
            timings["embed_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            near: dict[str, list[tuple[float, str, int]]] = {}
            for name, cache in caches.items():
                key = embedders[name].key
                found = self._dense(name, cache, vectors[key], depth, filters)
                near.setdefault(key, []).extend((d, name, r) for r, d in found)
            # one list per embedder, merged by cosine distance: distances of two embedders'
            # vectors are not on one scale, so corpora built with different ones fuse by rank
            for key, entries in near.items():
                static = by_key[key].kind == "static"
                weight = self.weights.dense_static if static else self.weights.dense
                if entries:
                    lists.append((weight, _best_first(entries, depth, reverse=False)))
            timings["dense_ms"] = (time.perf_counter() - t) * 1000
        if mode == "hybrid" and SENTENCE_WEIGHT and not message and not whole_file:
            t = time.perf_counter()
            lists.extend(self._sentence_lists(caches, query, depth, filters))
            timings["sentences_ms"] = (time.perf_counter() - t) * 1000
        if mode in ("hybrid", "lexical"):
            # a bare name asks for its definition: the definitions lead, in their order.
            # The symbol table is an exact-name match, so lexical mode ("for exact
            # identifiers") has it too: BM25 alone ranks the many chunks that call a
            # name above the one that defines it.
            name_query = is_name_query(query)
            defs: list[tuple[tuple[Any, ...], str, int]] = []
            for name, cache in caches.items():
                defs.extend((key, name, r) for key, r in _symbol_rows(cache, query, filters))
            if defs:
                ranked = _best_first(defs, SYMBOL_DEPTH, reverse=False)
                (sharp if name_query else lists).append((self.weights.symbol, ranked))
        if mode == "hybrid":
            path_weight = self.weights.path_in_example if example else self.weights.path
            if path_weight and not message and not name_query:
                by_path: list[tuple[float, str, int]] = []
                for name, cache in caches.items():
                    index = pathrank.path_index(cache, cache.get_info("generation") or "")
                    files = index.rank(query, depth)
                    if PATH_BEST_CHUNK and not whole_file and files:
                        # a question about a file's topic is answered by the section of
                        # it that speaks to the question, not by its opening lines
                        files = _best_chunk_of_files(cache, files, tokens)
                    by_path.extend((sc, name, r) for sc, r in files)
                if by_path:
                    allowed = _allowed_rows(caches, filters)
                    by_path = [e for e in by_path if allowed is None or e[2] in allowed[e[1]]]
                    lists.append((path_weight, _best_first(by_path, depth, reverse=True)))
            if self.weights.pasted_paths:
                # the library files a paste's frames and diagnostics name, under someone
                # else's prefix: the chunks at their lines, the deepest frame's first
                t = time.perf_counter()
                named = pastedpaths.library_rows(caches, query, tokens)
                if named:
                    allowed = _allowed_rows(caches, filters)
                    named = [e for e in named if allowed is None or e[1] in allowed[e[0]]]
                if named:
                    (sharp if PASTED_PATHS_SHARP else lists).append(
                        (self.weights.pasted_paths, named)
                    )
                timings["paths_ms"] = (time.perf_counter() - t) * 1000
            raising: list[tuple[str, int]] = []
            if pools and self.weights.raises:
                t = time.perf_counter()
                min_share = 0.0 if message else BARE_MIN_SHARE
                raising = _raise_sites(caches, pools, min_share)
                if raising:
                    sharp.append((self.weights.raises, raising))
                timings["raises_ms"] = (time.perf_counter() - t) * 1000
            # a message Python itself wrote has no raise site of its own (a site of another
            # type's message may share its words): the definitions of the class or function
            # it quotes rank as sharply as a raise site
            said_names: list[str] = []
            for said_text in said_texts if PYTHON_NAMES else []:
                said_names.extend(errortext.python_names(said_text))
            if message and not raising and MESSAGE_NAMES:
                # no site raises the message (another version's wording, or a compiler's
                # C++ the corpus leaves out): the code it names is where it was raised
                said_names.extend(n for n in errortext.code_names(message) if n not in said_names)
            if said_names and self.weights.raises:
                said_defs: list[tuple[tuple[Any, ...], str, int]] = []
                for name, cache in caches.items():
                    said_defs.extend(
                        (key, name, r) for key, r in _definition_rows(cache, said_names, filters)
                    )
                if said_defs:
                    ranked = _best_first(said_defs, PYTHON_NAMES_DEPTH, reverse=False)
                    sharp.append((self.weights.raises, ranked))
        fused = _rrf(lists, sharp)
        # a long question with a pile of teaching material on top: past the first few,
        # each teaching chunk counts a little less, making room for the API source
        thin = (
            mode == "hybrid"
            and TEACH_DECAY < 1.0
            and not whole_file
            and len(query.split()) >= TEACH_DECAY_MIN_WORDS
        )
        hits = self._materialize(caches, fused, k, filters, mode, example, teach, thin)
        took = (time.perf_counter() - t0) * 1000
        return SearchResult(hits, took, mode, names, timings)

    def _sentence_lists(
        self, caches: dict[str, CorpusCache], query: str, depth: int, filters: Filters
    ) -> list[tuple[float, list[tuple[str, int]]]]:
        """A long question's sentences, each ranked on its own too (body BM25 and dense),
        so the line that asks is not drowned by the setting told around it."""
        lists: list[tuple[float, list[tuple[str, int]]]] = []
        for part in querytext.sentences(query, SENTENCE_MIN_QUERY_WORDS):
            part_tokens = tokenize(part)
            part_idf = _shared_idf(caches, part_tokens, ("body",)) if len(caches) > 1 else {}
            body: list[tuple[float, str, int]] = []
            for name, cache in caches.items():
                w = part_idf.get(name, {}).get("body")
                body.extend(_body_pool(cache, part_tokens, depth, filters, w))
            if body and SENTENCE_BODY:
                ranked = _best_first(body, depth, reverse=True)
                lists.append((SENTENCE_WEIGHT * SENTENCE_BODY, ranked))
            near: dict[str, list[tuple[float, str, int]]] = {}
            for name, cache in caches.items():
                e = self.embedder_for(name)
                found = self._dense(name, cache, query_vector(e, part), depth, filters)
                near.setdefault(e.key, []).extend((d, name, r) for r, d in found)
            for entries in near.values():
                if entries and SENTENCE_DENSE:
                    ranked = _best_first(entries, depth, reverse=False)
                    lists.append((SENTENCE_WEIGHT * SENTENCE_DENSE, ranked))
        return lists

    def _dense(
        self, name: str, cache: CorpusCache, vector: Any, depth: int, filters: Filters
    ) -> list[tuple[int, float]]:
        """(row, cosine distance) of the nearest chunks of one corpus, nearest first."""
        if self.store.local:
            return _local_dense(cache, vector, depth, filters)
        n = depth * (4 if filters.path else 1)
        found = self.store.query(name, vector, n, filters.where())
        rows = cache.rows_for_ids([i for i, _ in found])
        ordered = [(rows[i], float(d)) for i, d in found if i in rows]
        if filters.path:
            allowed = cache.filter_rows(paths_glob=filters.path, language=None, kind=None) or set()
            ordered = [(r, d) for r, d in ordered if r in allowed]
        return ordered[:depth]

    def _materialize(
        self,
        caches: dict[str, CorpusCache],
        fused: list[tuple[tuple[str, int], float]],
        k: int,
        filters: Filters,
        mode: str,
        example: bool = False,
        teach: bool = False,
        thin: bool = False,
    ) -> list[Hit]:
        # the same window whatever k is (up to 10), so top-5 is the head of top-10
        wanted = fused[: max(k * 3, RERANK_WINDOW)]
        by_corpus: dict[str, list[int]] = {}
        for (name, row), _ in wanted:
            by_corpus.setdefault(name, []).append(row)
        chunks = {name: self.chunks.get(caches[name], rows) for name, rows in by_corpus.items()}
        hits: list[Hit] = []
        for (name, row), score in wanted:
            found = chunks[name].get(row)
            if found is None or not filters.accepts(found.chunk):
                continue
            chunk = copy.copy(found.chunk)  # the hit's own: a caller may change it
            # tiny chunks (a heading, a two-line stub) say little: a little lower, never
            # enough to overturn a clear first place
            prior = 0.8 + 0.2 * min(1.0, found.lines / SHORT_CHUNK_LINES)
            if HUB_PRIOR < 1.0 and found.listing >= HUB_SHARE:
                prior *= HUB_PRIOR
            if example and chunk.kind in EXAMPLE_KINDS:
                prior *= EXAMPLE_BOOST
            elif teach and chunk.kind in TEACHING_KINDS:
                prior *= TEACH_BOOST
            hits.append(Hit(chunk, score=score * prior, via=mode))
        hits.sort(key=lambda h: -h.score)
        if thin:
            hits = thin_teaching(hits)
        hits = spread(merge_adjacent(hits))[:k]
        for i, h in enumerate(hits, 1):
            h.rank = i
        return hits


SHORT_CHUNK_LINES = 8
HUB_SHARE = 0.7  # of a chunk's lines that are listing (see hubs.py) to make it a hub
HUB_PRIOR = 0.85  # a hub chunk's score
EXAMPLE_KINDS = frozenset({"example", "tutorial"})
EXAMPLE_BOOST = 1.3  # an example-seeking query's score for example and tutorial chunks
OWN_WORDS_MIN = 6  # of a user's words around a pasted error to search them with it (0: never)
BARE_MIN_SHARE = 0.75  # of a bare message a raise site must account for (1.0: off)
PYTHON_NAMES = 1  # a message Python itself wrote: the definitions of the names it quotes (0: off)
MESSAGE_NAMES = 1  # a message no site raises: the definitions of the code names it spells (0: off)
PYTHON_NAMES_DEPTH = 3  # ... at most this many of them, as sharp as a raise site
SENTENCE_WEIGHT = 1.0  # each list of a long question's sentences (0: off)
SENTENCE_BODY = 1.0  # ... times this for a sentence's body BM25 list
SENTENCE_DENSE = 1.0  # ... and this for its dense list
SENTENCE_MIN_QUERY_WORDS = 25  # a question this long is also searched sentence by sentence
PATH_BEST_CHUNK = True  # path hits stand in by the file's best chunk for the query
# a question asking for a whole file (``querytext.seeks_file``) that names no code: a file
# of the whole-file ranking stands in by its opening unless a later chunk's body score is
# at least this many times the opening's (0: off, the best chunk always)
FILE_OPENING = 2.0
# a question in words: the material that teaches (tutorials, guides, docs, examples)
TEACHING_KINDS = frozenset({"tutorial", "doc", "example"})
TEACH_BOOST = 1.0  # its score for such a question (1.0: off)
TEACH_PLAIN_ONLY = False  # only for questions that name no identifier
# a long question in a user's words (a setting told, then the ask) pulls in the tutorials
# and examples that share the setting's words, and they fill the top while the API
# source the question means waits below: the n-th teaching chunk past the first
# TEACH_DECAY_FREE scores TEACH_DECAY ** n of its own (1.0: off). Not for a question after
# a whole file (``querytext.seeks_file``): an example is what that one wants
TEACH_DECAY = 0.8
TEACH_DECAY_FREE = 3
TEACH_DECAY_MIN_WORDS = 20  # of the question's words (short queries name what they want)
PASTED_PATHS_SHARP = False  # the pasted paths' list fused as sharply as a raise site
RAISE_POOL = 200  # body matches of an error message whose raise sites are read
BARE_LINE_POOL = 50  # ... of each line of a question read as a bare message
SYMBOL_DEPTH = 20  # definitions taken from the symbol table
RANKER_DEPTH = 60  # candidates taken from each ranker before fusion
RERANK_WINDOW = 30  # fused candidates re-scored (length prior, merging) before the cut at k


QUERY_THREADS = 1  # torch threads that embed one query (0: torch's default)


def query_vector(embedder: Embedder, text: str) -> Any:
    """The query's embedding, computed on ``QUERY_THREADS`` threads: one short sentence
    gains nothing from more, and on a busy machine the threads wait on each other (on 2
    shared cores: 20 ms on one thread, 100-500 ms on two)."""
    torch = sys.modules.get("torch")
    if torch is None or not QUERY_THREADS or torch.get_num_threads() <= QUERY_THREADS:
        return embedder.embed_query(text)
    before = torch.get_num_threads()
    torch.set_num_threads(QUERY_THREADS)
    try:
        return embedder.embed_query(text)
    finally:
        torch.set_num_threads(before)


def _lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip())


@dataclass(frozen=True)
class Ranked:
    """A chunk as the ranking reads it, with what it derives from the chunk's text."""

    chunk: Chunk
    lines: int  # non-blank lines (the length prior)
    listing: float  # ``hubs.listing_share`` of its text


class ChunkMemo:
    """The chunks a Searcher has read, by corpus and row, with what ranking derives from
    them: queries bring back the same chunks again and again (half of those read over the
    evaluation queries had been read before), and building a chunk and scanning its text
    cost more than the rest of its part in a search.

    A corpus's memo holds only while its database is the same: the same connection, no
    write through it (``total_changes``) and no commit by any other connection or process
    (``PRAGMA data_version``, an index run elsewhere). Anything else starts it over, so a
    re-indexed corpus never answers with the chunks it had before."""

    MAX_ROWS = 8192  # per corpus, before its memo starts over

    def __init__(self) -> None:
        self._memo: dict[str, tuple[tuple[Any, int, int], dict[int, Ranked]]] = {}

    def get(self, cache: CorpusCache, rows: Sequence[int]) -> dict[int, Ranked]:
        db = cache.db()
        stamp = (db, db.total_changes, int(db.execute("PRAGMA data_version").fetchone()[0]))
        held = self._memo.get(cache.corpus)
        if held is None or held[0][0] is not db or held[0][1:] != stamp[1:]:
            held = (stamp, {})
            self._memo[cache.corpus] = held
        memo = held[1]
        todo = [r for r in rows if r not in memo]
        if todo:
            if len(memo) + len(todo) > self.MAX_ROWS:
                memo.clear()
                todo = list(rows)
            for row, chunk in cache.chunks_by_rows(todo).items():
                memo[row] = Ranked(chunk, _lines(chunk.text), hubs.listing_share(chunk.text))
        return {r: memo[r] for r in rows if r in memo}


def _best_first(
    entries: list[tuple[Any, str, int]], depth: int, *, reverse: bool
) -> list[tuple[str, int]]:
    """(corpus, row) of ``(score, corpus, row)`` entries of several corpora, best first
    (highest score with ``reverse``, else lowest), at most ``depth``; ties keep their order."""
    ordered = sorted(entries, key=lambda e: e[0], reverse=reverse)
    return [(name, row) for _, name, row in ordered[:depth]]


def _lexical(
    cache: CorpusCache, tokens: list[str], depth: int, filters: Filters
) -> dict[str, list[int]]:
    """Rows ranked by each lexical field (see ``lexical.LexicalIndex``)."""
    return {
        field: [row for row, _ in ranked]
        for field, ranked in _lexical_scored(cache, tokens, depth, filters).items()
    }


def _shared_idf(
    caches: dict[str, CorpusCache], tokens: list[str], fields: Sequence[str] = ()
) -> dict[str, dict[str, dict[str, float]]]:
    """Token weights that put several corpora's BM25 scores on one IDF (of ``fields``,
    default all)."""
    from .lexical import FIELDS, shared_idf_weights

    stats = {}
    for name, cache in caches.items():
        index = cache.bm25()
        if index is not None and tokens:
            stats[name] = {field: index.doc_stats(field, tokens) for field in fields or FIELDS}
    return shared_idf_weights(stats)


def _lexical_scored(
    cache: CorpusCache,
    tokens: list[str],
    depth: int,
    filters: Filters,
    weights: dict[str, dict[str, float]] | None = None,
    opening: float = 0.0,
) -> dict[str, list[tuple[int, float]]]:
    """(row, BM25 score) ranked by each lexical field; ``weights`` from ``_shared_idf``,
    ``opening`` as ``LexicalIndex.rank_scored`` takes it."""
    import numpy as np

    index = cache.bm25()
    if index is None or not tokens:
        return {}
    allowed = cache.filter_rows(
        paths_glob=filters.path, language=filters.language, kind=filters.kind
    )
    mask = None
    if allowed is not None:
        mask = np.isin(index.rows, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
    ranked: dict[str, list[tuple[int, float]]] = index.rank_scored(
        tokens, depth, mask, weights, opening=opening
    )
    return ranked


def _local_dense(
    cache: CorpusCache, vector: Any, depth: int, filters: Filters
) -> list[tuple[int, float]]:
    """(row, cosine distance) nearest to ``vector`` in the corpus's vector snapshot
    (``vectors.DenseIndex``), nearest first."""
    import numpy as np

    index = cache.dense()
    if index is None:
        return []
    allowed = cache.filter_rows(
        paths_glob=filters.path, language=filters.language, kind=filters.kind
    )
    mask = None
    if allowed is not None:
        mask = np.isin(index.rows, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
    return index.rank_scored(vector, depth, mask)


def _symbol_rows(
    cache: CorpusCache, query: str, filters: Filters
) -> list[tuple[tuple[Any, ...], int]]:
    """(sort key, row) of chunks that define a name the query spells out, definitions
    before uses; the keys order definitions of several corpora too."""
    names = identifiers(query)
    if not names and len(query.split()) == 1:
        names = [query.strip()]
    return _definition_rows(cache, names, filters)


def _definition_rows(
    cache: CorpusCache, names: Sequence[str], filters: Filters
) -> list[tuple[tuple[Any, ...], int]]:
    """``_symbol_rows`` for the given ``names``."""
    ranked: list[tuple[tuple[Any, ...], int]] = []
    seen: set[int] = set()
    found = [symbols.rank(cache, name, filters) for name in names]
    rows = cache.rows_for_ids(list({c.id: None for defs in found for _, c in defs}))
    for defs in found:
        for key, chunk in defs:
            row = rows.get(chunk.id)
            if row is not None and row not in seen:
                seen.add(row)
                ranked.append((key, row))
    ranked.sort(key=lambda kr: kr[0])
    return ranked[:SYMBOL_DEPTH]


def _best_chunk_of_files(
    cache: CorpusCache, ranked: list[tuple[float, int]], tokens: list[str]
) -> list[tuple[float, int]]:
    """``ranked``'s (score, first chunk row) with each file's row swapped for its chunk
    with the best BM25 body score for ``tokens`` (the first chunk where none matches)."""
    import numpy as np

    index = cache.bm25()
    if index is None or not tokens or not len(index.rows):
        return ranked
    body = index.scores("body", tokens)
    wanted = np.fromiter((row for _, row in ranked), np.int64, count=len(ranked))
    where = np.flatnonzero(np.isin(index.rows, wanted))
    file_of_row = dict(zip(index.rows[where].tolist(), index.file_of[where].tolist(), strict=True))
    # only the ranked files' chunks: a long question's words match most of a corpus
    matched = np.flatnonzero(body > 0)
    matched = matched[np.isin(index.file_of[matched], index.file_of[where])]
    if not len(matched):
        return ranked
    # each file's best matching chunk: the first of its chunks in (file, -score) order
    order = matched[np.lexsort((-body[matched], index.file_of[matched]))]
    files, first = np.unique(index.file_of[order], return_index=True)
    best_of = dict(zip(files.tolist(), index.rows[order[first]].tolist(), strict=True))
    out = []
    for score, row in ranked:
        f = file_of_row.get(row)
        best = best_of.get(f) if f is not None else None
        out.append((score, int(best) if best is not None else row))
    return out


def _allowed_rows(caches: dict[str, CorpusCache], filters: Filters) -> dict[str, set[int]] | None:
    """Per corpus, the rows the filters let through; None when nothing is filtered."""
    if not (filters.path or filters.language or filters.kind):
        return None
    out = {}
    for name, cache in caches.items():
        rows = cache.filter_rows(
            paths_glob=filters.path, language=filters.language, kind=filters.kind
        )
        out[name] = rows if rows is not None else set()
    return out


def _body_pool(
    cache: CorpusCache,
    tokens: list[str],
    n: int,
    filters: Filters,
    weights: dict[str, float] | None,
) -> list[tuple[float, str, int]]:
    """(BM25 body score, corpus, row) of the ``n`` best chunks by body text alone."""
    import numpy as np

    index = cache.bm25()
    if index is None or not tokens or not len(index.rows):
        return []
    scores = index.scores("body", tokens, weights)
    allowed = cache.filter_rows(
        paths_glob=filters.path, language=filters.language, kind=filters.kind
    )
    if allowed is not None:
        mask = np.isin(index.rows, np.fromiter(allowed, dtype=np.int64, count=len(allowed)))
        scores = np.where(mask, scores, 0.0)
    n = min(n, int((scores > 0).sum()))
    if n <= 0:
        return []
    top = np.argpartition(-scores, n - 1)[:n]
    return [(float(scores[i]), cache.corpus, int(index.rows[i])) for i in top]


def _raise_sites(
    caches: dict[str, CorpusCache],
    pools: Sequence[tuple[str, list[tuple[float, str, int]]]],
    min_share: float = 0.0,
) -> list[tuple[str, int]]:
    """(corpus, row) of the pooled chunks whose statement raises a message, best first:
    each ``(message, pool)`` read for its own message; a chunk found for several counts
    its best share."""
    best: dict[tuple[str, int], tuple[float, int]] = {}
    for message, pool in pools:
        by_corpus: dict[str, list[int]] = {}
        place: dict[tuple[str, int], int] = {}  # a site's place in the pool: ties go by it
        for _, name, row in pool:
            by_corpus.setdefault(name, []).append(row)
            place.setdefault((name, row), len(place))
        prepared = raises.prepare(message)
        for name, rows in by_corpus.items():
            for row, text in caches[name].texts_by_rows(rows).items():
                share, _ = raises.match(text, prepared)
                if share > 0 and share >= min_share:
                    key = (-share, place[(name, row)])
                    best[(name, row)] = min(best.get((name, row), key), key)
    ordered = sorted(best.items(), key=lambda kv: kv[1])
    return [key for key, _ in ordered[:SYMBOL_DEPTH]]


def is_name_query(query: str) -> bool:
    """A query that is nothing but one identifier (``tl.dot``, ``make_tiled_copy``)."""
    q = query.strip().rstrip("()")
    return len(q.split()) == 1 and bool(identifiers(q) or q.isidentifier())


SHARP_RRF_K = 2


def _rrf(
    lists: list[tuple[float, list[tuple[str, int]]]],
    sharp: list[tuple[float, list[tuple[str, int]]]] | None = None,
) -> list[tuple[tuple[str, int], float]]:
    """Reciprocal-rank fusion; ``sharp`` lists use a small k, so their top ranks dominate."""
    scores: dict[tuple[str, int], float] = {}
    for k, group in ((RRF_K, lists), (SHARP_RRF_K, sharp or [])):
        for weight, ranked in group:
            for rank, key in enumerate(ranked, 1):
                scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def thin_teaching(hits: list[Hit]) -> list[Hit]:
    """``hits`` (best first), the n-th teaching chunk (``TEACHING_KINDS``) past the first
    ``TEACH_DECAY_FREE`` scoring ``TEACH_DECAY ** n`` of its own, re-sorted: a soft cap
    on how much of the top one kind of material takes."""
    seen = 0
    for hit in hits:
        if hit.chunk.kind in TEACHING_KINDS:
            seen += 1
            if seen > TEACH_DECAY_FREE:
                hit.score *= TEACH_DECAY ** (seen - TEACH_DECAY_FREE)
    return sorted(hits, key=lambda h: -h.score)
