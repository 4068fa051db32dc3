"""Retrieval evaluation: run judged queries through one or more rankers and score them.

Queries are JSON Lines (``//`` lines are comments)::

    {"query": "how do I partition a tensor across threads with a tiled copy",
     "corpus": "cutlass", "kind": "howto",
     "relevant": ["python/CuTeDSL/cutlass/cute/atom.py#make_tiled_copy",
                  "media/docs/cpp/cute/0t_mma_atom.md"]}

A target is ``path`` (any chunk of the file), ``path#name`` (a chunk of the file that
defines ``name`` or whose title names it as a whole word) or ``path:START-END`` (a chunk
overlapping those lines); ``path`` may be a glob. A query's targets are alternatives:
each is an acceptable answer. With ``file_level`` a hit counts when its file holds a
target (for whole-file rankers, and to compare with them).

Several query sets (``dev``, ``test``, ``old``) are scored in one run, each reported as
its own group, and several configurations (``Config``: another index directory, search
settings such as fusion weights or module constants, the cross-encoder) run on the same
queries so a ranking switch is A/B-tested in one table: per set, mode, group (all, per
corpus, per kind) the Recall@1/5/10, MRR@10, nDCG@10 (binary gain, each target counted
once) and latency p50/p95, plus each configuration's change against the first one.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .corpus import Hit
from .errors import UserError

KS = (1, 5, 10)
METRICS = ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10")
_RANGE = re.compile(r"^(?P<path>.+):(?P<start>\d+)-(?P<end>\d+)$")


@dataclass(frozen=True)
class Target:
    path: str
    name: str = ""
    start: int = 0
    end: int = 0

    @classmethod
    def parse(cls, text: str) -> Target:
        if "#" in text:
            path, name = text.split("#", 1)
            return cls(path, name=name)
        m = _RANGE.match(text)
        if m:
            return cls(m["path"], start=int(m["start"]), end=int(m["end"]))
        return cls(text)

    def matches_path(self, path: str) -> bool:
        return path == self.path or fnmatch.fnmatchcase(path, self.path)

    def matches(self, hit: Hit, file_level: bool = False) -> bool:
        c = hit.chunk
        if not self.matches_path(c.path):
            return False
        if file_level:
            return True
        if self.name:
            names = {
                c.symbol,
                c.symbol.rsplit(".", 1)[-1],
                c.symbol.rsplit("::", 1)[-1],
                *c.defines,
            }
            if self.name in names:
                return True
            # a heading or title that names it as a whole word (``dot`` is not ``dot_scaled``)
            return re.search(rf"(?<!\w){re.escape(self.name)}(?!\w)", c.title) is not None
        if self.start:
            return c.start_line <= self.end and self.start <= c.end_line
        return True


@dataclass
class Query:
    query: str
    corpus: str
    kind: str
    targets: list[Target]
    id: str = ""


@dataclass
class QuerySet:
    name: str
    queries: list[Query]
    path: str = ""


@dataclass
class QueryResult:
    query: Query
    mode: str
    first_rank: int  # 0 when no acceptable answer in the top k
    ndcg: float
    latency_ms: float
    top: list[str] = field(default_factory=list)
    set: str = ""
    config: str = ""


def load_queries(path: Path) -> list[Query]:
    if not path.is_file():
        raise UserError(f"{path}: no such query file")
    out: list[Query] = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            row = json.loads(line)
            targets = [Target.parse(t) for t in row["relevant"]]
            if not targets:
                raise KeyError("relevant is empty")
            out.append(
                Query(
                    query=row["query"],
                    corpus=row["corpus"],
                    kind=row.get("kind", "other"),
                    targets=targets,
                    id=row.get("id", f"q{n}"),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise UserError(
                f"{path.name}:{n}: bad query line ({exc}); need query, corpus, relevant"
            ) from None
    if not out:
        raise UserError(f"{path}: no queries")
    return out


def load_query_sets(specs: Sequence[str]) -> list[QuerySet]:
    """``NAME=PATH`` or ``PATH`` (named after the file: ``eval-dev.jsonl`` -> ``dev``)."""
    sets: list[QuerySet] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or "/" in name:
            path, name = spec, Path(spec).stem.removeprefix("eval-")
        if any(s.name == name for s in sets):
            raise UserError(f"two query sets are named {name!r}; name them: NAME=PATH")
        sets.append(QuerySet(name, load_queries(Path(path)), path))
    if not sets:
        raise UserError("no query files given")
    return sets


def score(
    hits: Sequence[Hit], targets: Sequence[Target], k: int = 10, file_level: bool = False
) -> tuple[int, float]:
    """(rank of the first acceptable hit or 0, nDCG@k)."""
    first = 0
    found: set[int] = set()
    dcg = 0.0
    for rank, hit in enumerate(hits[:k], 1):
        matched = [i for i, t in enumerate(targets) if t.matches(hit, file_level)]
        if matched and not first:
            first = rank
        new = [i for i in matched if i not in found]
        if new:
            found.add(new[0])
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(r + 1) for r in range(1, min(len(targets), k) + 1))
    return first, (dcg / ideal if ideal else 0.0)


# --- what is evaluated -------------------------------------------------------------------


class Ranker(Protocol):
    """Anything that answers a query with ranked hits: the workspace's searcher under a
    configuration, or a reference ranker (``bench/reference_rankers.py``)."""

    name: str
    modes: Sequence[str]  # the modes it answers (a reference ranker has one of its own)

    def corpora(self) -> set[str]: ...

    def search(self, query: Query, mode: str, k: int) -> list[Hit]: ...


# settings a configuration may carry besides the searcher's own fields
SPECIAL_KEYS = ("index", "rerank", "rerank_model")


@dataclass
class Config:
    """A named configuration: an index directory and search settings (``key:value``)."""

    name: str
    index_dir: str | None = None
    settings: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, spec: str) -> Config:
        """``NAME=key:value,key:value`` (``index:DIR`` picks another index)."""
        name, sep, rest = spec.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UserError(f"bad --config {spec!r}: expected NAME=key:value,...")
        settings: dict[str, str] = {}
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, sep, value = item.partition(":")
            if not sep or not key.strip():
                raise UserError(f"bad setting {item!r} in --config {name}: expected key:value")
            settings[key.strip()] = value.strip()
        index = settings.pop("index", None)
        return cls(name, index, settings)


# modules whose upper-case constants shape the ranking besides ``search``'s own; a
# configuration names them qualified (``lexical.FILE_BY_BODY``)
RANKING_MODULES = (
    "lexical",
    "pathrank",
    "querytext",
    "errortext",
    "hubs",
    "hitlist",
    "raises",
    "pastedpaths",
)


def settable(searcher: Any) -> dict[str, tuple[Any, str]]:
    """Every setting a configuration may change: the searcher's weights fields, its
    public scalar attributes, the search module's upper-case constants, and those of
    the other ranking modules (``RANKING_MODULES``), qualified by the module's name."""
    import importlib

    from . import search as search_module

    out: dict[str, tuple[Any, str]] = {}
    weights = getattr(searcher, "weights", None)
    if dataclasses.is_dataclass(weights):
        for f in dataclasses.fields(weights):
            out[f.name] = (weights, f.name)
    for attr, value in vars(searcher).items():
        if not attr.startswith("_") and isinstance(value, bool | int | float | str):
            out.setdefault(attr, (searcher, attr))
    for attr, value in vars(search_module).items():
        if attr.isupper() and isinstance(value, bool | int | float | str):
            out.setdefault(attr, (search_module, attr))
    for name in RANKING_MODULES:
        module = importlib.import_module(f"{__package__}.{name}")
        for attr, value in vars(module).items():
            if attr.isupper() and attr != "TYPE_CHECKING" and _scalar(value):
                out.setdefault(f"{name}.{attr}", (module, attr))
    return out


def _scalar(value: Any) -> bool:
    """A constant a configuration can set from ``key:value`` (not a schema or a table)."""
    return isinstance(value, bool | int | float) or (isinstance(value, str) and "\n" not in value)


def _coerce(key: str, text: str, current: Any) -> Any:
    try:
        if isinstance(current, bool):
            low = text.lower()
            if low not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                raise ValueError(text)
            return low in ("1", "true", "on", "yes")
        if isinstance(current, int):
            return int(text)
        if isinstance(current, float):
            return float(text)
    except ValueError:
        raise UserError(f"setting {key}: {text!r} is not a {type(current).__name__}") from None
    return text


@contextmanager
def applied(searcher: Any, settings: dict[str, str]) -> Iterator[None]:
    """Apply ``settings`` to a searcher (and the search module) for the duration."""
    known = settable(searcher)
    saved: list[tuple[Any, str, Any]] = []
    for key, text in settings.items():
        if key in SPECIAL_KEYS:
            continue
        if key not in known:
            raise UserError(f"unknown setting {key!r}; known: {', '.join(sorted(known))}")
        owner, attr = known[key]
        current = getattr(owner, attr)
        saved.append((owner, attr, current))
        setattr(owner, attr, _coerce(key, text, current))
    try:
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


class WorkspaceRanker:
    """The project's search (``Workspace.search``) under one configuration."""

    def __init__(self, ws: Any, config: Config) -> None:
        self.ws = ws
        self.config = config
        self.name = config.name
        self.modes: Sequence[str] = ("hybrid", "lexical", "dense")
        rerank = config.settings.get("rerank", "false")
        self.rerank = _coerce("rerank", rerank, False)
        self.rerank_model = config.settings.get("rerank_model") or None
        self._stack: Any = None

    def corpora(self) -> set[str]:
        return set(self.ws.store.corpora())

    def __enter__(self) -> WorkspaceRanker:
        self._stack = applied(self.ws.searcher, self.config.settings)
        self._stack.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.__exit__(*exc)

    def forget_query_vectors(self) -> None:
        """Each configuration and mode embeds its queries afresh, so latencies compare."""
        cache = getattr(self.ws.embedder, "_queries", None)
        if isinstance(cache, dict):
            cache.clear()

    def search(self, query: Query, mode: str, k: int) -> list[Hit]:
        result = self.ws.search(
            query.query,
            corpora=[query.corpus],
            k=k,
            mode=mode,
            rerank=self.rerank,
            rerank_model=self.rerank_model,
        )
        hits: list[Hit] = result.hits
        return hits


def run(
    rankers: Sequence[Ranker],
    sets: Sequence[QuerySet],
    modes: Sequence[str] = ("hybrid", "lexical", "dense"),
    k: int = 10,
    file_level: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[QueryResult]:
    """Every query of every set through every ranker, in each of ``modes`` it answers (a
    ranker that answers none of them runs its own). Queries of corpora a ranker has not
    indexed are skipped."""
    results: list[QueryResult] = []
    for ranker in rankers:
        indexed = ranker.corpora()
        todo = [(s, [q for q in s.queries if q.corpus in indexed]) for s in sets]
        if not any(qs for _, qs in todo):
            raise UserError(f"{ranker.name}: none of the queries' corpora is indexed")
        run_modes = [m for m in modes if m in ranker.modes] or list(ranker.modes)
        with _entered(ranker):
            _warm(ranker, [q for _, qs in todo for q in qs], run_modes[0], k)
            for mode in run_modes:
                forget = getattr(ranker, "forget_query_vectors", None)
                if forget:
                    forget()
                if progress:
                    progress(f"{ranker.name} {mode}")
                for s, qs in todo:
                    for q in qs:
                        t = time.perf_counter()
                        hits = ranker.search(q, mode, k)
                        latency = (time.perf_counter() - t) * 1000
                        first, ndcg = score(hits, q.targets, k, file_level)
                        top = [h.id for h in hits[:3]]
                        results.append(
                            QueryResult(
                                q, mode, first, ndcg, latency, top, set=s.name, config=ranker.name
                            )
                        )
    return results


@contextmanager
def _entered(ranker: Ranker) -> Iterator[None]:
    enter = getattr(ranker, "__enter__", None)
    if enter is None:
        yield
        return
    enter()
    try:
        yield
    finally:
        ranker.__exit__(None, None, None)  # type: ignore[attr-defined]


def _warm(ranker: Ranker, queries: Sequence[Query], mode: str, k: int) -> None:
    """One search per corpus first: the model and each corpus's caches load outside the
    timed searches."""
    seen: set[str] = set()
    for q in queries:
        if q.corpus not in seen:
            seen.add(q.corpus)
            ranker.search(q, mode, k)


# --- reports -------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    pos = (len(values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)


def _groups(results: Sequence[QueryResult], by: Sequence[str]) -> dict[str, list[QueryResult]]:
    groups: dict[str, list[QueryResult]] = {"all": list(results)}
    for r in results:
        for b in by:
            if b == "corpus":
                key = f"corpus={r.query.corpus}"
            elif b == "kind":
                key = f"kind={r.query.kind}"
            elif b == "corpus-kind":
                key = f"{r.query.corpus}/{r.query.kind}"
            else:
                raise UserError(f"unknown grouping {b!r} (corpus, kind, corpus-kind)")
            groups.setdefault(key, []).append(r)
    return groups


def _metrics(rs: Sequence[QueryResult]) -> dict[str, float]:
    n = len(rs)
    row: dict[str, float] = {}
    for kk in KS:
        row[f"recall@{kk}"] = round(sum(1 for r in rs if 0 < r.first_rank <= kk) / n, 3)
    row["mrr@10"] = round(sum(1.0 / r.first_rank for r in rs if r.first_rank) / n, 3)
    row["ndcg@10"] = round(sum(r.ndcg for r in rs) / n, 3)
    return row


def _ordered(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def summarize(
    results: Sequence[QueryResult], by: Sequence[str] = ("corpus", "kind")
) -> list[dict[str, Any]]:
    """One row per (set, config, mode, group): group "all", "corpus=NAME", "kind=NAME"
    (and "CORPUS/KIND" with ``by`` corpus-kind)."""
    rows: list[dict[str, Any]] = []
    for set_name in _ordered([r.set for r in results]):
        for config in _ordered([r.config for r in results]):
            for mode in _ordered([r.mode for r in results]):
                mine = [
                    r
                    for r in results
                    if r.set == set_name and r.config == config and r.mode == mode
                ]
                if not mine:
                    continue
                for group, rs in _groups(mine, by).items():
                    row: dict[str, Any] = {
                        "type": "eval",
                        "set": set_name,
                        "config": config,
                        "mode": mode,
                        "group": group,
                        "n": len(rs),
                        **_metrics(rs),
                    }
                    lat = [r.latency_ms for r in rs]
                    row["p50_ms"] = round(_pct(lat, 0.5), 1)
                    row["p95_ms"] = round(_pct(lat, 0.95), 1)
                    rows.append(row)
    return rows


def compare(
    results: Sequence[QueryResult], by: Sequence[str] = ("corpus", "kind")
) -> list[dict[str, Any]]:
    """Each configuration against the first one, per (set, mode, group): metric deltas
    and how many queries rank their first acceptable answer better or worse."""
    configs = _ordered([r.config for r in results])
    if len(configs) < 2:
        return []
    base = configs[0]
    key = {(r.set, r.config, r.mode, r.query.id, r.query.query): r for r in results}
    rows: list[dict[str, Any]] = []
    for set_name in _ordered([r.set for r in results]):
        for config in configs[1:]:
            for mode in _ordered([r.mode for r in results]):
                pairs = []
                for r in results:
                    if r.set != set_name or r.config != config or r.mode != mode:
                        continue
                    b = key.get((set_name, base, mode, r.query.id, r.query.query))
                    if b is not None:
                        pairs.append((b, r))
                if not pairs:
                    continue
                mine = [r for _, r in pairs]
                theirs = {id(r): b for b, r in pairs}
                for group, rs in _groups(mine, by).items():
                    bs = [theirs[id(r)] for r in rs]
                    m_new, m_old = _metrics(rs), _metrics(bs)
                    rr = [(_rr(b), _rr(r)) for b, r in zip(bs, rs, strict=True)]
                    rows.append(
                        {
                            "type": "compare",
                            "set": set_name,
                            "config": config,
                            "against": base,
                            "mode": mode,
                            "group": group,
                            "n": len(rs),
                            **{f"delta_{m}": round(m_new[m] - m_old[m], 3) for m in METRICS},
                            "better": sum(1 for o, n in rr if n > o),
                            "worse": sum(1 for o, n in rr if n < o),
                        }
                    )
    return rows


def _rr(r: QueryResult) -> float:
    return 1.0 / r.first_rank if r.first_rank else 0.0


def misses(
    results: Sequence[QueryResult],
    mode: str = "hybrid",
    sets: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Queries whose best answer was not ranked first (of ``sets``, default all)."""
    return [
        {
            "type": "miss",
            "set": r.set,
            "config": r.config,
            "mode": r.mode,
            "id": r.query.id,
            "query": r.query.query,
            "rank": r.first_rank,
            "top": r.top,
        }
        for r in results
        if r.mode == mode and r.first_rank != 1 and (sets is None or r.set in sets)
    ]


TABLE_COLUMNS = (
    "set",
    "group",
    "mode",
    "config",
    "n",
    "recall@1",
    "recall@5",
    "recall@10",
    "mrr@10",
    "ndcg@10",
    "p50_ms",
    "p95_ms",
)
DELTA_COLUMNS = ("Δr@10", "Δmrr", "Δndcg", "better", "worse")


def table(rows: Sequence[dict[str, Any]], deltas: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The report as text cells: one line per (set, group, mode, config), the
    configurations of one group next to each other, deltas against the first one."""
    by_key = {(d["set"], d["group"], d["mode"], d["config"]): d for d in deltas}
    order = {g: i for i, g in enumerate(_ordered([r["group"] for r in rows]))}
    configs = {c: i for i, c in enumerate(_ordered([r["config"] for r in rows]))}
    modes = {m: i for i, m in enumerate(_ordered([r["mode"] for r in rows]))}
    sets = {s: i for i, s in enumerate(_ordered([r["set"] for r in rows]))}
    ordered = sorted(
        rows,
        key=lambda r: (
            sets[r["set"]],
            order[r["group"]],
            modes[r["mode"]],
            configs[r["config"]],
        ),
    )
    show_deltas = bool(deltas)
    lines = []
    for r in ordered:
        cells = [str(r[c]) for c in TABLE_COLUMNS]
        if show_deltas:
            d = by_key.get((r["set"], r["group"], r["mode"], r["config"]))
            if d is None:
                cells += [""] * len(DELTA_COLUMNS)
            else:
                cells += [
                    f"{d['delta_recall@10']:+.3f}",
                    f"{d['delta_mrr@10']:+.3f}",
                    f"{d['delta_ndcg@10']:+.3f}",
                    str(d["better"]),
                    str(d["worse"]),
                ]
        lines.append(cells)
    return lines


def table_header(with_deltas: bool) -> list[str]:
    return list(TABLE_COLUMNS) + (list(DELTA_COLUMNS) if with_deltas else [])


def markdown(rows: Sequence[dict[str, Any]], deltas: Sequence[dict[str, Any]]) -> str:
    head = table_header(bool(deltas))
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(cells) + " |" for cells in table(rows, deltas)]
    return "\n".join(out)
