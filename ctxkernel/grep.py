"""grep over a corpus's files: ripgrep when it is installed, a Python fallback
otherwise; bounded in time and in output, results as Hits with context lines.

The files are the ones the index recorded (so include/exclude rules and package path
mapping hold); when they are not on this machine (a shared index on a chroma server)
the chunk texts stand in for them.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .corpus import Chunk, Hit
from .errors import UserError
from .store import Store

DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_MAX_RESULTS = 200
ARGS_PER_CALL = 2000

# Nested quantifiers such as (a+)+ or (\w*)* backtrack exponentially in Python's re.
_CATASTROPHIC = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*[+*{]")


@dataclass
class GrepResult:
    hits: list[Hit]
    files_searched: int
    truncated: str = ""  # why output stopped early ("time limit", "max results"), or ""
    engine: str = "rg"
    took_ms: float = 0.0


@dataclass
class _Line:
    number: int
    text: str
    match: bool


def find_rg() -> str | None:
    exe = shutil.which("rg")
    if exe:
        return exe
    local = Path(sys.executable).parent / "rg"
    return str(local) if local.is_file() else None


def check_pattern(pattern: str, *, python_engine: bool) -> None:
    """UserError for a pattern that cannot work; catastrophic ones only matter to Python's re."""
    if not pattern:
        raise UserError("empty grep pattern")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UserError(f"bad regex {pattern!r}: {exc}") from None
    if python_engine and _CATASTROPHIC.search(pattern):
        raise UserError(
            f"regex {pattern!r} has nested quantifiers that can take exponential time; "
            "rewrite it without a repeated group of repeated items (or install ripgrep)"
        )


def grep(
    store: Store,
    corpus: str,
    pattern: str,
    *,
    ignore_case: bool = False,
    path_glob: str | None = None,
    context: int = 0,
    max_results: int = DEFAULT_MAX_RESULTS,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    engine: str = "auto",
) -> GrepResult:
    if corpus not in store.corpora():
        have = ", ".join(store.corpora()) or "none"
        raise UserError(f"corpus {corpus!r} is not indexed (indexed: {have})")
    if context < 0 or context > 50:
        raise UserError("-C must be between 0 and 50")
    if max_results < 1:
        raise UserError("--max-count must be at least 1")
    rg = find_rg() if engine in ("auto", "rg") else None
    if engine == "rg" and rg is None:
        raise UserError(
            "ripgrep (rg) is not installed; pip install ripgrep==14.1.0 or use --engine python"
        )
    check_pattern(pattern, python_engine=rg is None)
    cache = store.synced_cache(corpus)
    t0 = time.perf_counter()
    files = cache.files()
    record = store.record(corpus)
    commit = record.version if record else ""
    local: dict[str, str] = {}
    for path, entry in files.items():
        if path_glob and not fnmatch.fnmatchcase(path, path_glob):
            continue
        if entry.local:
            local[entry.local] = path
    # the files are where the index saw them, or none of them is (an index shared through
    # a chroma server): one stat tells which, not one per file
    if local and not os.path.isfile(next(iter(local))):
        local = {f: p for f, p in local.items() if os.path.isfile(f)}
    searched = len(local)
    if not local:
        # no files on this machine: search the chunk texts instead
        hits, truncated = _grep_chunks(
            cache.iter_rows("row, path, start_line, text"),
            pattern,
            ignore_case,
            path_glob,
            context,
            max_results,
        )
        return GrepResult(
            _to_hits(corpus, hits, commit, store, cache),
            len({h[0] for h in hits}),
            truncated,
            "chunks",
            (time.perf_counter() - t0) * 1000,
        )
    if rg:
        blocks, truncated = _rg(
            rg, list(local), pattern, ignore_case, context, max_results, time_limit_s
        )
        used = "rg"
    else:
        blocks, truncated = _py(
            list(local), pattern, ignore_case, context, max_results, time_limit_s
        )
        used = "python"
    found = [(local[f], lines) for f, lines in blocks]
    found.sort(key=lambda b: (b[0], b[1][0].number))
    return GrepResult(
        _to_hits(corpus, found, commit, store, cache),
        searched,
        truncated,
        used,
        (time.perf_counter() - t0) * 1000,
    )


def _rg(
    rg: str,
    files: list[str],
    pattern: str,
    ignore_case: bool,
    context: int,
    max_results: int,
    time_limit_s: float,
) -> tuple[list[tuple[str, list[_Line]]], str]:
    """ripgrep's plain output with NUL after the path: ``path\0N:text`` for a match,
    ``path\0N-text`` for context, ``--`` between groups. Parsing it is cheaper than --json."""
    deadline = time.monotonic() + time_limit_s
    blocks: list[tuple[str, list[_Line]]] = []
    matches = 0
    base = [
        rg,
        "--no-config",
        "--no-ignore",
        "--hidden",
        "--null",
        "--line-number",
        "--with-filename",
    ]
    base += ["--no-heading", "--color", "never", "-e", pattern]
    if ignore_case:
        base.append("-i")
    if context:
        base += ["-C", str(context)]
    for start in range(0, len(files), ARGS_PER_CALL):
        proc = subprocess.Popen(
            [*base, "--", *files[start : start + ARGS_PER_CALL]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        current: dict[str, list[_Line]] = {}
        try:
            for raw in proc.stdout:
                if time.monotonic() > deadline:
                    proc.kill()
                    return _flush(blocks, current), f"time limit ({time_limit_s:g} s)"
                parsed = _parse_rg_line(raw)
                if parsed is None:
                    continue
                path, line = parsed
                lines = current.setdefault(path, [])
                if lines and line.number > lines[-1].number + 1:
                    blocks.append((path, lines))
                    lines = current[path] = []
                lines.append(line)
                if line.match:
                    matches += 1
                    if matches >= max_results:
                        proc.kill()
                        return _flush(blocks, current), f"max results ({max_results})"
        finally:
            proc.stdout.close()
            err = proc.stderr.read().decode("utf-8", "replace")
            proc.stderr.close()
            proc.wait()
        if proc.returncode == 2 and "regex" in err:
            raise UserError(f"bad regex {pattern!r}: {' '.join(err.split())[:300]}")
        _flush(blocks, current)
    return blocks, ""


def _parse_rg_line(raw: bytes) -> tuple[str, _Line] | None:
    path_bytes, sep, rest = raw.partition(b"\0")
    if not sep:
        return None  # the "--" between context groups
    digits = 0
    while digits < len(rest) and 48 <= rest[digits] <= 57:
        digits += 1
    if digits == 0 or digits >= len(rest):
        return None
    kind = rest[digits : digits + 1]
    text = rest[digits + 1 :].rstrip(b"\n").rstrip(b"\r").decode("utf-8", "replace")
    return path_bytes.decode("utf-8", "replace"), _Line(int(rest[:digits]), text, kind == b":")


def _flush(
    blocks: list[tuple[str, list[_Line]]], current: dict[str, list[_Line]]
) -> list[tuple[str, list[_Line]]]:
    for path, lines in current.items():
        if lines:
            blocks.append((path, lines))
    current.clear()
    return blocks


def _py(
    files: list[str],
    pattern: str,
    ignore_case: bool,
    context: int,
    max_results: int,
    time_limit_s: float,
) -> tuple[list[tuple[str, list[_Line]]], str]:
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    deadline = time.monotonic() + time_limit_s
    blocks: list[tuple[str, list[_Line]]] = []
    matches = 0
    for file in files:
        if time.monotonic() > deadline:
            return blocks, f"time limit ({time_limit_s:g} s)"
        try:
            lines = Path(file).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for block in _blocks(lines, regex, context, 1):
            blocks.append((file, block))
            matches += sum(1 for ln in block if ln.match)
            if matches >= max_results:
                return blocks, f"max results ({max_results})"
    return blocks, ""


def _blocks(
    lines: Sequence[str], regex: re.Pattern[str], context: int, first_number: int
) -> Iterable[list[_Line]]:
    """Matching lines with ``context`` lines around them, touching ranges joined."""
    hit = [i for i, line in enumerate(lines) if regex.search(line)]
    hitset = set(hit)
    ranges: list[list[int]] = []
    for i in hit:
        lo, hi = max(0, i - context), min(len(lines) - 1, i + context)
        if ranges and lo <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], hi)
        else:
            ranges.append([lo, hi])
    for lo, hi in ranges:
        yield [_Line(j + first_number, lines[j], j in hitset) for j in range(lo, hi + 1)]


def _grep_chunks(
    rows: Iterable[tuple[int, str, int, str]],
    pattern: str,
    ignore_case: bool,
    path_glob: str | None,
    context: int,
    max_results: int,
) -> tuple[list[tuple[str, list[_Line]]], str]:
    check_pattern(pattern, python_engine=True)
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    found: list[tuple[str, list[_Line]]] = []
    matches = 0
    for _, path, start, text in rows:
        if path_glob and not fnmatch.fnmatchcase(path, path_glob):
            continue
        for block in _blocks((text or "").splitlines(), regex, context, int(start)):
            found.append((path, block))
            matches += sum(1 for ln in block if ln.match)
            if matches >= max_results:
                return found, f"max results ({max_results})"
    return found, ""


def _to_hits(
    corpus: str, blocks: list[tuple[str, list[_Line]]], commit: str, store: Store, cache: object
) -> list[Hit]:
    from .corpus import get_corpus

    try:
        definition = get_corpus(corpus)
    except UserError:
        definition = None
    record = store.record(corpus)
    ref = record.ref if record else ""
    hits: list[Hit] = []
    for rank, (path, lines) in enumerate(blocks, 1):
        start, end = lines[0].number, lines[-1].number
        url = definition.link(ref=ref, path=path, start=start, end=end) if definition else ""
        chunk = Chunk(
            corpus=corpus,
            path=path,
            start_line=start,
            end_line=end,
            text="\n".join(ln.text for ln in lines),
            commit=commit,
            url=url,
        )
        match_lines = [ln.number for ln in lines if ln.match]
        hits.append(
            Hit(
                chunk,
                score=0.0,
                rank=rank,
                via="grep",
                extra={"matches": match_lines, "line": match_lines[0] if match_lines else start},
            )
        )
    return hits
