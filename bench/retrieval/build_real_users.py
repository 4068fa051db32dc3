"""Build the real-users evaluation set for ``ctxkernel eval`` from its curated source file.

usage::

    python bench/retrieval/build_real_users.py --cutlass MIRROR/cutlass --triton MIRROR/triton \\
        --tilelang MIRROR/tilelang [--sources bench/queries/real-users-sources.jsonl] \\
        [--out bench/queries] [--check]

The source file (``real-users-sources.jsonl``, written by hand) holds one judged question
per line, each restating a question or error report from a public GitHub thread of
NVIDIA/cutlass, triton-lang/triton or tile-ai/tilelang in the asker's terms::

    {"repo": "triton-lang/triton", "number": 4197, "type": "issue", "corpus": "triton",
     "kind": "error", "query": "...", "relevant": ["python/triton/language/semantic.py:1488-1495"],
     "note": "why these targets answer it"}

Each target (``path``, ``path:START-END`` or ``path#Name``, the forms ``ctxkernel eval``
reads) is checked against the corpus mirror at the pinned commit: the file exists there,
the corpus definition (``corpora/NAME.toml``) indexes it as a search candidate, a line
range lies within the file, a ``#Name`` occurs in it as a whole word. The questions are
split into ``real-users-dev.jsonl`` and ``real-users-test.jsonl`` by a hash of the
thread (repository and number), so every question of one thread lands in one half and
the split never moves when questions are added. ``--check`` writes nothing and exits 1
when the committed files differ from what the sources give.

A mirror is a git directory or a work tree of the upstream repository holding the pinned
commit. Exit 0 written (or up to date), 1 ``--check`` found a difference, 2 bad input
(one line on stderr).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ctxkernel.corpus import Corpus, load_corpus_file  # noqa: E402
from ctxkernel.errors import UserError  # noqa: E402

SOURCES = REPO / "bench" / "queries" / "real-users-sources.jsonl"
OUT = REPO / "bench" / "queries"
STEM = "real-users"

# the corpus commits every judgment was checked at
PINNED = {
    "cutlass": "7107b05535f8977f5ecb9d01ee203205b1fd9bc4",
    "triton": "f4fca2c0bc0e19930d2be76bb06ee7b232b60e86",
    "tilelang": "a35008a42531c62b976ae4cec3855d4383db0f3c",
}
MIRRORED = {
    "cutlass": "NVIDIA/cutlass",
    "triton": "triton-lang/triton (lightseekorg mirror)",
    "tilelang": "tile-ai/tilelang",
}
# the threads each corpus's questions may come from
THREAD_REPOS = {
    "NVIDIA/cutlass": "cutlass",
    "triton-lang/triton": "triton",
    "tile-ai/tilelang": "tilelang",
}
THREAD_TYPES = ("issue", "pr", "discussion")
KINDS = ("howto", "error", "api", "example", "concept")
ABBREV = {"cutlass": "cu", "triton": "tr", "tilelang": "tl"}
FIELDS = ("repo", "number", "type", "corpus", "kind", "query", "relevant", "note")
_RANGE = re.compile(r"^(?P<path>[^#:]+):(?P<start>\d+)-(?P<end>\d+)$")

HEADER = """\
// Real-users evaluation set for `ctxkernel eval`, {split} split. dev: tune on it. test: report it; do not read its misses while tuning.
// Built by: python bench/retrieval/build_real_users.py --cutlass MIRROR/cutlass --triton MIRROR/triton --tilelang MIRROR/tilelang (from bench/queries/real-users-sources.jsonl)
// Corpora (local mirrors, not committed): {commits}.
// {total} questions from {threads} public GitHub threads ({thread_types}) of NVIDIA/cutlass, triton-lang/triton and tile-ai/tilelang; {n_dev} dev / {n_test} test, split by a hash of repository and thread number (every question of a thread in one half). This split, by corpus x kind: {counts}.
// Queries: each restates one asker's question in their own terms (their words for things, what they tried, what they did not know), written afresh, not copied; compiler and runtime output they pasted (messages, tracebacks with their paths, loc(...) diagnostics) is kept as printed. "source" names the thread.
// Judgments: from the thread, never from this project's search results: the file, docs page or example a maintainer pointed to, the files the fixing change touched, or for an error the raise/assert site of its message; each target opened at the pinned commit (the file exists there, the corpus definition indexes it, line ranges hold the code). "origin" says why the target answers the question.
"""


class BadInput(Exception):
    """Bad sources or mirrors: one line for stderr."""


@dataclass
class Row:
    repo: str
    number: int
    type: str
    corpus: str
    kind: str
    query: str
    relevant: list[str]
    note: str
    line: int
    id: str = ""

    @property
    def thread(self) -> str:
        return f"{self.repo}#{self.number}"


@dataclass
class Mirror:
    """One corpus's files at its pinned commit, read with git."""

    corpus: Corpus
    root: Path
    commit: str
    paths: set[str] = field(default_factory=set)
    _lines: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def open(cls, name: str, root: Path, commit: str) -> Mirror:
        try:
            corpus = load_corpus_file(REPO / "corpora" / f"{name}.toml")
        except UserError as exc:
            raise BadInput(str(exc)) from None
        if not root.exists():
            raise BadInput(f"--{name} {root}: no such directory")
        listing = _git(root, "ls-tree", "-r", "-z", "--name-only", commit)
        if listing is None:
            raise BadInput(f"--{name} {root}: not a git mirror holding commit {commit}")
        return cls(corpus, root, commit, {p for p in listing.split("\0") if p})

    def lines(self, path: str) -> list[str]:
        if path not in self._lines:
            text = _git(self.root, "show", f"{self.commit}:{path}")
            self._lines[path] = (text or "").splitlines()
        return self._lines[path]


def _git(root: Path, *args: str) -> str | None:
    proc = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, errors="replace"
    )
    return proc.stdout if proc.returncode == 0 else None


# --- reading and checking the sources --------------------------------------------------


def read_sources(path: Path) -> list[Row]:
    if not path.is_file():
        raise BadInput(f"{path}: no such sources file")
    rows: list[Row] = []
    seen: set[tuple[str, int, str]] = set()
    for n, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip() or text.lstrip().startswith("//"):
            continue
        where = f"{path.name}:{n}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise BadInput(f"{where}: not a JSON object")
        missing = [f for f in FIELDS if f not in data]
        if missing:
            raise BadInput(f"{where}: missing {', '.join(missing)}")
        row = Row(**{f: data[f] for f in FIELDS}, line=n)
        _check_fields(row, where)
        key = (row.repo, row.number, row.query)
        if key in seen:
            raise BadInput(f"{where}: the same question twice for {row.thread}")
        seen.add(key)
        rows.append(row)
    if not rows:
        raise BadInput(f"{path}: no questions")
    return rows


def _check_fields(row: Row, where: str) -> None:
    if row.repo not in THREAD_REPOS:
        raise BadInput(f"{where}: repo {row.repo!r} is not one of {', '.join(THREAD_REPOS)}")
    if row.corpus != THREAD_REPOS[row.repo]:
        raise BadInput(f"{where}: a {row.repo} thread belongs to corpus {THREAD_REPOS[row.repo]}")
    if not isinstance(row.number, int) or isinstance(row.number, bool) or row.number < 1:
        raise BadInput(f"{where}: number must be a positive integer")
    if row.type not in THREAD_TYPES:
        raise BadInput(f"{where}: type must be one of {', '.join(THREAD_TYPES)}")
    if row.kind not in KINDS:
        raise BadInput(f"{where}: kind must be one of {', '.join(KINDS)}")
    for name in ("query", "note"):
        value = getattr(row, name)
        if not isinstance(value, str) or not value.strip():
            raise BadInput(f"{where}: {name} must be a non-empty string")
    if (
        not isinstance(row.relevant, list)
        or not row.relevant
        or not all(isinstance(t, str) and t for t in row.relevant)
    ):
        raise BadInput(f"{where}: relevant must be a non-empty list of targets")


def check_target(target: str, mirror: Mirror) -> str:
    """'' when the target holds at the pinned commit, else what is wrong."""
    name = ""
    start = end = 0
    if "#" in target:
        path, name = target.split("#", 1)
        if not re.fullmatch(r"[A-Za-z_][\w.:]*", name):
            return f"{target}: bad symbol {name!r}"
    elif m := _RANGE.match(target):
        path, start, end = m["path"], int(m["start"]), int(m["end"])
        if start < 1 or end < start:
            return f"{target}: lines are 1-based and start <= end"
    else:
        path = target
    if any(c in path for c in "*?[") or ":" in path:
        return f"{target}: name one file (no globs)"
    if path not in mirror.paths:
        return f"{target}: no such file at {mirror.commit[:12]}"
    if not mirror.corpus.wants(path) or mirror.corpus.is_link_only(path):
        return f"{target}: corpus {mirror.corpus.name} does not search this file"
    lines = mirror.lines(path)
    if end and end > len(lines):
        return f"{target}: the file has {len(lines)} lines"
    if name:
        last = name.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
        word = re.compile(rf"(?<![\w]){re.escape(last)}(?![\w])")
        if not any(word.search(line) for line in lines):
            return f"{target}: {last!r} does not occur in the file"
    return ""


def validate(rows: Sequence[Row], mirrors: dict[str, Mirror], sources: Path) -> None:
    for row in rows:
        mirror = mirrors.get(row.corpus)
        if mirror is None:
            raise BadInput(f"{sources.name}:{row.line}: needs --{row.corpus} (a mirror)")
        for target in row.relevant:
            problem = check_target(target, mirror)
            if problem:
                raise BadInput(f"{sources.name}:{row.line}: {problem}")


# --- split and write ---------------------------------------------------------------------


def split_of(repo: str, number: int) -> str:
    """'dev' or 'test', fixed by the thread alone."""
    digest = hashlib.sha256(f"{repo}#{number}".encode()).digest()
    return "dev" if digest[0] % 2 == 0 else "test"


def assign_ids(rows: Sequence[Row]) -> None:
    per_thread: Counter[str] = Counter()
    for row in rows:
        per_thread[row.thread] += 1
        n = per_thread[row.thread]
        row.id = f"ru-{ABBREV[row.corpus]}-{row.number}" + (f"-{n}" if n > 1 else "")


def thread_types(rows: Sequence[Row]) -> str:
    """'N issues, M pull requests' over distinct threads, in THREAD_TYPES order."""
    seen = Counter(kind for _, kind in {(r.thread, r.type) for r in rows})
    words = {"issue": "issues", "pr": "pull requests", "discussion": "discussions"}
    return ", ".join(f"{seen[t]} {words[t]}" for t in THREAD_TYPES if seen[t])


def render(rows: Sequence[Row], split: str, totals: dict[str, int]) -> str:
    mine = [r for r in rows if split_of(r.repo, r.number) == split]
    counts = Counter(f"{r.corpus}/{r.kind}" for r in mine)
    commits = "; ".join(f"{c}: {MIRRORED[c]} {PINNED[c]}" for c in PINNED)
    header = HEADER.format(
        split=split,
        commits=commits,
        total=totals["total"],
        threads=totals["threads"],
        thread_types=thread_types(rows),
        n_dev=totals["dev"],
        n_test=totals["test"],
        counts=", ".join(f"{k} {counts[k]}" for k in sorted(counts)),
    )
    lines = [header.rstrip("\n")]
    for r in mine:
        lines.append(
            json.dumps(
                {
                    "id": r.id,
                    "corpus": r.corpus,
                    "kind": r.kind,
                    "query": r.query,
                    "relevant": r.relevant,
                    "origin": r.note,
                    "source": {"repo": r.repo, "number": r.number, "type": r.type},
                },
                ensure_ascii=False,
            )
        )
    return "\n".join(lines) + "\n"


def render_all(rows: Sequence[Row]) -> dict[str, str]:
    """{file name: text} of the two halves (ids assigned in source order)."""
    assign_ids(rows)
    splits = Counter(split_of(r.repo, r.number) for r in rows)
    totals = {
        "total": len(rows),
        "threads": len({r.thread for r in rows}),
        "dev": splits["dev"],
        "test": splits["test"],
    }
    return {f"{STEM}-{s}.jsonl": render(rows, s, totals) for s in ("dev", "test")}


def build(sources: Path, mirrors: dict[str, Mirror]) -> dict[str, str]:
    """Read and check the sources against the mirrors, then render both halves."""
    rows = read_sources(sources)
    validate(rows, mirrors, sources)
    return render_all(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in PINNED:
        ap.add_argument(f"--{name}", type=Path, help=f"git mirror of {MIRRORED[name]}")
    ap.add_argument("--sources", type=Path, default=SOURCES)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare, write nothing")
    args = ap.parse_args(argv)
    try:
        mirrors = {
            name: Mirror.open(name, getattr(args, name), commit)
            for name, commit in PINNED.items()
            if getattr(args, name) is not None
        }
        files = build(args.sources, mirrors)
    except BadInput as exc:
        print(f"build_real_users: {exc}", file=sys.stderr)
        return 2
    if args.check:
        stale = [
            n
            for n, t in files.items()
            if not (args.out / n).is_file() or (args.out / n).read_text() != t
        ]
        for name in stale:
            print(
                f"build_real_users: {args.out / name} is not what the sources give", file=sys.stderr
            )
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text)
    counts = {
        n: sum(1 for ln in t.splitlines() if not ln.startswith("//")) for n, t in files.items()
    }
    print(" ".join(f"{n}: {c}" for n, c in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
