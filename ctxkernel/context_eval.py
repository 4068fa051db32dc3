"""Context efficiency: how much of what answers a query an agent has read after the
first 2,000 and 8,000 tokens of tool output.

Two readers over the same index and the same token budget:

- ``search``: the ``search`` tool as an agent calls it (hybrid, the query's corpus, k
  50, whole chunks: ``lines_per_hit`` 400, ``max_tokens`` the larger budget), its output
  read from the top;
- ``grep-agent``: a scripted grep-only agent. The query's distinctive terms (its
  identifiers and words of at least four letters that are not stop words, at most
  ``GREP_TERMS``) go through ripgrep (fixed strings, ignoring case) over the corpus's
  indexed files; files are ranked by the IDF (over the files that matched any term) of
  the distinct terms they hold, then by how many matches; the agent reads the top files
  whole, in that order, as the ``read`` tool prints them (numbered lines), until the
  budget is spent.

Tokens are counted with the tools' own tokenizer (``tools.tokens``). A query's share at
a budget is, over its judged targets (alternatives), the best share of a target's lines
that the output shows within the budget: ``path:START-END`` is those lines,
``path#name`` the lines of the file's chunks that define or title ``name``, and a whole
``path`` (an example file) counts 1 as soon as any line of it is shown.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .evaluate import Query, QuerySet, Target

BUDGETS = (2000, 8000)
GREP_TERMS = 8
SEARCH_K = 50
SEARCH_LINES = 400
_HEADER = re.compile(r"^\[\d+\] (?P<corpus>[^:\s]+):(?P<path>\S+?):\d+-\d+(?:\s|$)")
_NUMBERED = re.compile(r"^\s*(?P<n>\d+)[ :] ")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
_STOP = frozenset(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "also",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "cannot",
        "could",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "ever",
        "from",
        "further",
        "have",
        "having",
        "here",
        "into",
        "just",
        "like",
        "more",
        "most",
        "much",
        "must",
        "need",
        "only",
        "other",
        "over",
        "same",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "very",
        "want",
        "what",
        "when",
        "where",
        "which",
        "while",
        "whom",
        "will",
        "with",
        "would",
        "your",
        "yours",
        "get",
        "gets",
        "getting",
        "make",
        "using",
        "used",
        "work",
        "works",
        "kernel",
        "kernels",
        "example",
        "examples",
        "thing",
        "things",
        "still",
        "even",
        "seems",
        "instead",
        "anyone",
    ]
)

Shown = list[tuple[int, str, int]]  # (tokens used up to and including it, path, line)


@dataclass(frozen=True)
class Gold:
    path: str
    lines: frozenset[int] | None  # None: the whole file (any shown line counts)


def gold_of(ws: Any, query: Query) -> list[Gold]:
    """The lines each of the query's targets stands for (see the module docstring)."""
    out: list[Gold] = []
    cache = ws.store.synced_cache(query.corpus)
    files = cache.files()
    for t in query.targets:
        paths = (
            [p for p in files if t.matches_path(p)] if any(c in t.path for c in "*?[") else [t.path]
        )
        for path in paths:
            out.append(_gold_of_target(cache, t, path))
    return out


def _gold_of_target(cache: Any, t: Target, path: str) -> Gold:
    if t.start:
        return Gold(path, frozenset(range(t.start, t.end + 1)))
    if t.name:
        from .corpus import Hit

        lines: set[int] = set()
        for chunk in cache.chunks_of_file(path):
            if Target(path, name=t.name).matches(Hit(chunk)):
                lines.update(range(chunk.start_line, chunk.end_line + 1))
        return Gold(path, frozenset(lines) if lines else None)
    return Gold(path, None)


def share(shown: Shown, budget: int, gold: Sequence[Gold]) -> float:
    """The best share of one target's lines that ``shown`` holds within ``budget`` tokens."""
    seen: dict[str, set[int]] = {}
    for used, path, line in shown:
        if used > budget:
            break
        seen.setdefault(path, set()).add(line)
    best = 0.0
    for g in gold:
        lines = seen.get(g.path)
        if not lines:
            continue
        if g.lines is None:
            return 1.0
        best = max(best, len(lines & g.lines) / len(g.lines))
    return best


def _tokens_of_lines(lines: list[str]) -> list[int]:
    from .tools import tokens

    return [n + 1 for n in tokens.count(lines)]  # each with its newline


def shown_by_search(ws: Any, query: Query, budget: int) -> Shown:
    """What the search tool's output shows, line by line, with the tokens used so far."""
    from .tools import SEARCH

    text = SEARCH.handler(
        ws,
        {
            "query": query.query,
            "corpus": [query.corpus],
            "k": SEARCH_K,
            "lines_per_hit": SEARCH_LINES,
            "max_tokens": budget,
        },
    )
    out: Shown = []
    used = 0
    path = ""
    lines = text.splitlines()
    for line, cost in zip(lines, _tokens_of_lines(lines), strict=True):
        used += cost
        m = _HEADER.match(line)
        if m:
            path = m["path"]
            continue
        n = _NUMBERED.match(line)
        if n and path:
            out.append((used, path, int(n["n"])))
    return out


def grep_terms(query: str) -> list[str]:
    """The query's distinctive terms: identifiers first, then its longer words."""
    from .tokenize import identifiers

    terms: list[str] = []
    for name in identifiers(query):
        name = name.strip(".")
        if len(name) >= 3:
            terms.append(name)
    words = [w for w in _WORD.findall(query) if w.lower() not in _STOP]
    terms += sorted(words, key=len, reverse=True)
    return list(dict.fromkeys(t.lower() for t in terms))[:GREP_TERMS]


def shown_by_grep_agent(ws: Any, query: Query, budget: int, rg: str | None = None) -> Shown:
    """What the scripted grep-only agent reads (see the module docstring)."""
    from .grep import find_rg

    cache = ws.store.synced_cache(query.corpus)
    files = {e.local: p for p, e in cache.files().items() if e.local}
    terms = grep_terms(query.query)
    rg = rg or find_rg()
    if not terms or not files or rg is None:
        return []
    roots = _roots(files)
    args = [rg, "-o", "-i", "-F", "--no-line-number", "--with-filename", "--no-messages"]
    for t in terms:
        args += ["-e", t]
    run = subprocess.run([*args, *roots], capture_output=True, text=True, errors="replace")
    held: dict[str, Counter[str]] = {}
    for line in run.stdout.splitlines():
        local, sep, match = line.rpartition(":")
        if not sep or local not in files:
            continue
        held.setdefault(local, Counter())[match.lower()] += 1
    if not held:
        return []
    df = Counter(t for c in held.values() for t in c)
    n = len(held)
    idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def key(local: str) -> tuple[float, int]:
        c = held[local]
        return (-sum(idf[t] for t in c), -sum(c.values()))

    out: Shown = []
    used = 0
    for local in sorted(held, key=key):
        path = files[local]
        try:
            with open(local, encoding="utf-8", errors="replace") as fh:
                text = fh.read().splitlines()
        except OSError:
            continue
        header = f"{query.corpus}:{path}"
        width = len(str(len(text)))
        numbered = [header] + [f"{i:>{width}}  {line}" for i, line in enumerate(text, 1)]
        for i, cost in enumerate(_tokens_of_lines(numbered)):
            used += cost
            if used > budget:
                return out
            if i:
                out.append((used, path, i))
    return out


def _roots(files: dict[str, str]) -> list[str]:
    """The folders the corpus's files live under (their snapshot's root, once)."""
    roots: set[str] = set()
    for local, path in files.items():
        if local.endswith(path):
            roots.add(local[: len(local) - len(path)].rstrip("/") or "/")
    return sorted(roots) or sorted(files)


READERS: dict[str, Callable[..., Shown]] = {
    "search": shown_by_search,
    "grep-agent": shown_by_grep_agent,
}


def run(
    ws: Any,
    sets: Sequence[QuerySet],
    budgets: Sequence[int] = BUDGETS,
    readers: Sequence[str] = ("search", "grep-agent"),
    by: Sequence[str] = ("corpus", "kind"),
) -> list[dict[str, Any]]:
    """One row per (set, reader, group): the mean share at each budget (``ctx@2000``...)."""
    indexed = set(ws.store.corpora())
    top = max(budgets)
    rows: list[dict[str, Any]] = []
    for s in sets:
        queries = [q for q in s.queries if q.corpus in indexed]
        golds = {id(q): gold_of(ws, q) for q in queries}
        for reader in readers:
            per: list[tuple[Query, list[float]]] = []
            for q in queries:
                shown = READERS[reader](ws, q, top)
                per.append((q, [share(shown, b, golds[id(q)]) for b in budgets]))
            for group, members in _groups(per, by).items():
                row: dict[str, Any] = {
                    "type": "context",
                    "set": s.name,
                    "reader": reader,
                    "group": group,
                    "n": len(members),
                }
                for i, b in enumerate(budgets):
                    row[f"ctx@{b}"] = round(sum(v[i] for _, v in members) / len(members), 3)
                rows.append(row)
    return rows


def _groups(
    per: list[tuple[Query, list[float]]], by: Sequence[str]
) -> dict[str, list[tuple[Query, list[float]]]]:
    groups: dict[str, list[tuple[Query, list[float]]]] = {"all": list(per)}
    for q, v in per:
        for b in by:
            key = {
                "corpus": f"corpus={q.corpus}",
                "kind": f"kind={q.kind}",
                "corpus-kind": f"{q.corpus}/{q.kind}",
            }[b]
            groups.setdefault(key, []).append((q, v))
    return groups
