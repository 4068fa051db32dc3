"""The Python grep engine, run as a child process (``python -m ctxkernel.grepworker``)
so that a request's deadline can kill it in the middle of a match, whatever the pattern
does: a backtracking engine cannot be interrupted from inside the process (and the
``regex`` package's own ``timeout`` counts CPU time, which a busy machine stretches).

Reads one job (a JSON object) on stdin, matches line by line with Python's ``re`` (the
``regex`` package for syntax ``re`` lacks, where installed), and writes JSON Lines on stdout, flushed as they are found:
``{"block": [path, [[number, text, is_match], ...]]}`` for each group of matching lines
with their context, then ``{"end": reason}`` (``""`` or ``"max results (N)"``) or
``{"error": message}`` for a pattern that does not compile.

A job is either ``files`` (recorded local copies, read only where they still resolve
inside ``root``; see ``confine``) or ``db`` (the corpus cache's chunk texts, for an index
whose files are not on this machine), with ``pattern``, ``ignore_case``, ``context``,
``max_results`` and, for ``db``, ``path_glob``.
"""

from __future__ import annotations

import fnmatch
import json
import re
import sqlite3
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO


def blocks(
    lines: Sequence[str], rx: Any, context: int, first_number: int
) -> Iterator[list[tuple[int, str, bool]]]:
    """Matching lines with ``context`` lines around them, touching ranges joined."""
    hit = [i for i, line in enumerate(lines) if rx.search(line)]
    hitset = set(hit)
    ranges: list[list[int]] = []
    for i in hit:
        lo, hi = max(0, i - context), min(len(lines) - 1, i + context)
        if ranges and lo <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], hi)
        else:
            ranges.append([lo, hi])
    for lo, hi in ranges:
        yield [(j + first_number, lines[j], j in hitset) for j in range(lo, hi + 1)]


def _texts(job: dict[str, Any]) -> Iterable[tuple[str, int, str]]:
    """(path to report, first line number, text) of what the job searches."""
    if "files" in job:
        from .confine import Confinement
        from .errors import UserError

        ids = {f: (int(d), int(i), int(n)) for f, (d, i, n) in job.get("ids", {}).items()}
        confined = Confinement(Path(job["root"]) if job.get("root") else None, ids)
        for file in job["files"]:
            try:
                data = confined.read_bytes(file, file)
            except UserError:
                continue  # swapped for a link since the parent listed it: left out
            if data is not None:
                yield file, 1, data.decode("utf-8", "replace")
        return
    db = sqlite3.connect(f"file:{job['db']}?mode=ro", uri=True)
    glob = job.get("path_glob")
    for path, start, text in db.execute("SELECT path, start_line, text FROM chunks ORDER BY row"):
        if not glob or fnmatch.fnmatchcase(path, glob):
            yield path, int(start), text or ""


def compile_pattern(pattern: str, ignore_case: bool) -> Any:
    """Python's ``re`` (fast); for what it cannot read (``\\p{L}``, ``\\X`` ...) the
    ``regex`` package when it is installed. ValueError with the reason otherwise."""
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except (re.error, OverflowError, RecursionError) as exc:
        first = exc
    try:
        import regex
    except ImportError:
        raise ValueError(str(first)) from None
    try:
        return regex.compile(pattern, regex.IGNORECASE if ignore_case else 0)
    except (regex.error, ValueError, OverflowError, RecursionError):
        raise ValueError(str(first)) from None


def run(job: dict[str, Any], out: TextIO) -> None:
    try:
        rx = compile_pattern(job["pattern"], bool(job.get("ignore_case")))
    except ValueError as exc:
        out.write(json.dumps({"error": str(exc)}) + "\n")
        return
    limit = int(job["max_results"])
    matches = 0
    for path, first, text in _texts(job):
        for block in blocks(text.splitlines(), rx, int(job["context"]), first):
            out.write(json.dumps({"block": [path, block]}) + "\n")
            out.flush()
            matches += sum(1 for _, _, m in block if m)
            if matches >= limit:
                out.write(json.dumps({"end": f"max results ({limit})"}) + "\n")
                return
    out.write(json.dumps({"end": ""}) + "\n")


def main() -> None:
    job = json.loads(sys.stdin.buffer.read())
    try:
        run(job, sys.stdout)
        sys.stdout.flush()
    except BrokenPipeError:  # the parent stopped reading (a deadline, enough results)
        pass


if __name__ == "__main__":
    main()
