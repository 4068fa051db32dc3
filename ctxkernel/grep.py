"""grep over a corpus's files: ripgrep when it is installed, a Python engine otherwise;
bounded in time and in output, results as Hits with context lines.

The files are the ones the index recorded (so include/exclude rules and package path
mapping hold), read only where they still resolve inside the corpus snapshot
(``confine``); when they are not on this machine (a shared index on a chroma server)
the chunk texts stand in for them.

One monotonic deadline holds for the whole request, whatever the engine: ripgrep and the
Python engine (``grepworker``, the one a plain install has) both run as child processes
that are killed when it passes, so a pattern that backtracks exponentially stops in time
too, with what was found by then.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .confine import Confinement
from .corpus import Chunk, Hit
from .errors import UserError, shown
from .store import Store

DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_MAX_RESULTS = 200
TIME_LIMIT = "time limit"  # how ``GrepResult.truncated`` starts when the deadline stopped it
ARGS_PER_CALL = 2000


@dataclass
class GrepResult:
    hits: list[Hit]
    files_searched: int
    truncated: str = ""  # why output stopped early ("time limit", "max results"), or ""
    engine: str = "rg"
    took_ms: float = 0.0
    refused: int = 0  # recorded files left out: they now resolve outside the corpus

    @property
    def timed_out(self) -> bool:
        """Stopped by the time limit: what was found is a part, and how big a part is
        unknown (unlike a stop at max results, which found at least that many)."""
        return self.truncated.startswith(TIME_LIMIT)


@dataclass
class _Line:
    number: int
    text: str
    match: bool


class _Deadline:
    """One monotonic deadline for a request, shared by every engine it uses."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def passed(self) -> bool:
        return time.monotonic() >= self.at

    @property
    def reason(self) -> str:
        return f"{TIME_LIMIT} ({self.seconds:g} s)"


def find_rg() -> str | None:
    exe = shutil.which("rg")
    if exe:
        return exe
    local = Path(sys.executable).parent / "rg"
    return str(local) if local.is_file() else None


def check_pattern(pattern: str) -> None:
    """UserError for a pattern that cannot work. Its syntax is left to the engine that
    runs it (ripgrep's is not Python's), inside the request's deadline."""
    if not pattern:
        raise UserError("empty grep pattern")
    if "\0" in pattern:
        raise UserError("a grep pattern cannot hold a NUL character")


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
    if not time_limit_s > 0 or time_limit_s != time_limit_s:
        raise UserError("--timeout must be a positive number of seconds")
    deadline = _Deadline(min(time_limit_s, 1e9))
    if corpus not in store.corpora():
        have = ", ".join(store.corpora()) or "none"
        raise UserError(f"corpus {shown(corpus)} is not indexed (indexed: {have})")
    if context < 0 or context > 50:
        raise UserError("-C must be between 0 and 50")
    if max_results < 1:
        raise UserError("--max-count must be at least 1")
    if engine not in ("auto", "rg", "python"):
        raise UserError(f"unknown grep engine {shown(engine)} (auto, rg or python)")
    rg = find_rg() if engine in ("auto", "rg") else None
    if engine == "rg" and rg is None:
        raise UserError(
            "ripgrep (rg) is not installed; pip install ripgrep==14.1.0 or use --engine python"
        )
    check_pattern(pattern)
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
    if local and not os.path.lexists(next(iter(local))):
        local = {f: p for f, p in local.items() if os.path.lexists(f)}
    if not local:
        # no files on this machine: search the chunk texts instead
        hits, truncated = _grep_chunks(
            cache.db_path,
            pattern,
            ignore_case,
            path_glob,
            context,
            max_results,
            deadline,
        )
        return GrepResult(
            _to_hits(corpus, hits, commit, store, cache),
            len({h[0] for h in hits}),
            truncated,
            "chunks",
            (time.perf_counter() - t0) * 1000,
        )
    key = (str(store.index_dir), corpus, cache.get_info("generation") or "")
    confined = Confinement.for_corpus(key, {p: e.local for p, e in files.items()}, cache.file_ids())
    allowed = {f: p for f, p in local.items() if confined.allows(f)}
    refused = len(local) - len(allowed)
    if rg:
        blocks, truncated = _rg(
            rg, list(allowed), pattern, ignore_case, context, max_results, deadline
        )
        used = "rg"
    else:
        blocks, truncated = _py(
            list(allowed), confined, pattern, ignore_case, context, max_results, deadline
        )
        used = "python"
    found = [(allowed[f], lines) for f, lines in blocks if f in allowed]
    found.sort(key=lambda b: (b[0], b[1][0].number))
    return GrepResult(
        _to_hits(corpus, found, commit, store, cache),
        len(allowed),
        truncated,
        used,
        (time.perf_counter() - t0) * 1000,
        refused,
    )


def _rg(
    rg: str,
    files: list[str],
    pattern: str,
    ignore_case: bool,
    context: int,
    max_results: int,
    deadline: _Deadline,
) -> tuple[list[tuple[str, list[_Line]]], str]:
    """ripgrep's plain output with NUL after the path: ``path\0N:text`` for a match,
    ``path\0N-text`` for context, ``--`` between groups. Parsing it is cheaper than --json.

    A timer kills ripgrep at the deadline, so a run that prints nothing for a long while
    (a huge corpus, a slow disk) stops in time too."""
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
        if deadline.passed():
            return blocks, deadline.reason
        proc = subprocess.Popen(
            [*base, "--", *files[start : start + ARGS_PER_CALL]],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        assert proc.stdout is not None and proc.stderr is not None
        timer = threading.Timer(max(0.0, deadline.left()), proc.kill)
        timer.daemon = True
        timer.start()
        current: dict[str, list[_Line]] = {}
        try:
            for raw in proc.stdout:
                if deadline.passed():
                    proc.kill()
                    return _flush(blocks, current), deadline.reason
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
            timer.cancel()
            proc.stdout.close()
            err = proc.stderr.read().decode("utf-8", "replace")
            proc.stderr.close()
            proc.wait()
        if deadline.passed():
            return _flush(blocks, current), deadline.reason
        if proc.returncode == 2 and "regex" in err:
            raise UserError(f"bad regex {shown(pattern)}: {' '.join(err.split())[:300]}")
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
    return os.fsdecode(path_bytes), _Line(int(rest[:digits]), text, kind == b":")


def _flush(
    blocks: list[tuple[str, list[_Line]]], current: dict[str, list[_Line]]
) -> list[tuple[str, list[_Line]]]:
    for path, lines in current.items():
        if lines:
            blocks.append((path, lines))
    current.clear()
    return blocks


def _python_engine(
    job: dict[str, Any], deadline: _Deadline
) -> tuple[list[tuple[str, list[_Line]]], str]:
    """Run the Python engine (``grepworker``) in a child process, killed at the deadline;
    the blocks it found by then, and why it stopped early ("" when it did not)."""
    import ctxkernel

    package_parent = str(Path(ctxkernel.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkernel.grepworker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    timer = threading.Timer(max(0.0, deadline.left()), proc.kill)
    timer.daemon = True
    timer.start()
    blocks: list[tuple[str, list[_Line]]] = []
    end: str | None = None
    try:
        try:
            proc.stdin.write(json.dumps(job).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        for raw in proc.stdout:
            message = json.loads(raw)
            if "block" in message:
                path, lines = message["block"]
                blocks.append((path, [_Line(n, t, m) for n, t, m in lines]))
            elif "error" in message:
                raise UserError(f"bad regex {shown(job['pattern'])}: {message['error']}")
            else:
                end = str(message.get("end", ""))
                break
            if deadline.passed():
                break
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace")
        proc.stderr.close()
        proc.wait()
    if end is not None:
        return blocks, end
    if deadline.passed():
        return blocks, deadline.reason
    last = err.strip().splitlines()[-1] if err.strip() else f"exit status {proc.returncode}"
    raise UserError(f"grep's Python engine failed: {last}")


def _py(
    files: list[str],
    confined: Confinement,
    pattern: str,
    ignore_case: bool,
    context: int,
    max_results: int,
    deadline: _Deadline,
) -> tuple[list[tuple[str, list[_Line]]], str]:
    job = {"pattern": pattern, "ignore_case": ignore_case, "context": context,
           "max_results": max_results, "files": files, "root": confined.root,
           "ids": {f: confined.ids[f] for f in files if f in confined.ids}}  # fmt: skip
    return _python_engine(job, deadline)


def _grep_chunks(
    db: Path,
    pattern: str,
    ignore_case: bool,
    path_glob: str | None,
    context: int,
    max_results: int,
    deadline: _Deadline,
) -> tuple[list[tuple[str, list[_Line]]], str]:
    job = {"pattern": pattern, "ignore_case": ignore_case, "context": context,
           "max_results": max_results, "db": str(db), "path_glob": path_glob}  # fmt: skip
    return _python_engine(job, deadline)


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
