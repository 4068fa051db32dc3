"""The retrieval tools — ``search``, ``grep``, ``docs``, ``read``, ``list_corpora`` — over a
Workspace: their descriptions for a model and handlers, the rendering of hits (id,
upstream URL, numbered lines) under the budget, grep's pattern guard and time limit, and
``read``'s confinement to the files a corpus recorded. Their input schemas are generated
from the queries declared in ``ctxkernel.queries``, which the CLI's options come from too."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from harness.optionspec import from_tool, tool_schema

from ..corpus import Hit, parse_chunk_id
from ..errors import UserError
from ..links.render import pick, render_lines
from ..queries import DocsQuery, GrepQuery, ListCorporaQuery, ReadQuery, SearchQuery
from ..render import counted
from . import tokens
from .base import NOTICE_CHARS, Budget, Tool, ToolError

if TYPE_CHECKING:
    from ..workspace import Workspace

GREP_GRACE_S = 1.0  # on top of the engine's own limit before the tool gives up on it


def _numbered(lines: list[str], first: int, marks: set[int] | None = None) -> list[str]:
    width = len(str(first + len(lines) - 1))
    out = []
    for i, line in enumerate(lines):
        n = first + i
        sep = ":" if marks is not None and n in marks else " "
        out.append(f"{n:>{width}}{sep} {line}")
    return out


def _hit_header(rank: int, hit: Hit) -> list[str]:
    c = hit.chunk
    label = c.symbol or c.title.strip("# ")
    # grep blocks are line ranges, not indexed chunks: no language or kind of their own
    tags = (
        ""
        if hit.via == "grep"
        else ", ".join(x for x in (c.language, c.kind, hit.extra.get("requires", "")) if x)
    )
    head = f"[{rank}] {c.id}" + (f"  {label}" if label else "") + (f"  ({tags})" if tags else "")
    return [head, f"url: {c.url or '(no upstream link for this corpus)'}"]


def _id_list(ids: list[str], room: int) -> str:
    """As many ids as fit in ``room`` characters, then an ellipsis."""
    out: list[str] = []
    used = 0
    for i, ident in enumerate(ids):
        if used + len(ident) + 2 > room and out:
            return ", ".join(out) + f", … ({len(ids) - i} more)"
        out.append(ident)
        used += len(ident) + 2
    return ", ".join(out)


def _render_hits(
    budget: Budget,
    hits: list[Hit],
    lines_per_hit: int,
    *,
    marks: bool = False,
    more_hint: str,
) -> str:
    """Hits one after another while they fit, the first cut by lines if it alone is too
    long; returns the cut notice ("" when everything went in)."""
    for i, hit in enumerate(hits):
        c = hit.chunk
        body = c.text.splitlines()
        matches = set(hit.extra.get("matches", [])) if marks else None
        shown = body[:lines_per_hit]
        block = _hit_header(hit.rank or i + 1, hit) + _numbered(shown, c.start_line, matches)
        if len(body) > len(shown):
            rest = f"{c.corpus}:{c.path}:{c.start_line + len(shown)}-{c.end_line}"
            block.append(f"  … {counted(len(body) - len(shown), 'more line')}: read {rest}")
        if budget.add("\n".join(block)):
            budget.add("")
            continue
        if i == 0:
            # the first hit alone is over budget: give as many of its lines as fit
            budget.add_lines(block[:2])
            last = c.start_line + budget.add_lines(block[2 : 2 + len(shown)])
            others = len(hits) - 1
            more = f" and {counted(others, 'more hit')}" if others else ""
            return (
                f"lines {last}-{c.end_line} of hit 1{more} not shown; {more_hint}; "
                f"the rest of hit 1 is {c.corpus}:{c.path}:{last}-{c.end_line}"
            )
        left = hits[i:]
        head = f"{counted(len(left), 'more hit')} not shown; {more_hint}: "
        return head + _id_list([h.id for h in left], NOTICE_CHARS - len(head) - 40)
    while budget.parts and budget.parts[-1] == "":
        budget.parts.pop()
    return ""


# --- the built-in tools -------------------------------------------------------------------


def _search(ws: Workspace, args: dict[str, Any]) -> str:
    query = from_tool(SearchQuery, args)
    result = query.run(ws)
    budget = Budget(query.max_tokens)
    where = ", ".join(result.corpora)
    skipped = "".join(f"\n[skipped: {line}]" for line in result.skipped.values())
    if not result.hits:
        return (
            f"No results for {_echo(query.query)} in {where} ({result.mode}). Try other words, "
            "fewer filters, mode='lexical' for exact identifiers, or grep for a regex."
        ) + skipped
    if skipped:
        budget.add(skipped.strip())
    budget.add(
        f"{counted(len(result.hits), 'result')} for {_echo(query.query)} in {where} "
        f"({result.mode}); "
        "cite ids as corpus:path:start-end, read(ref=id) for more lines."
    )
    budget.add("")
    cut = _render_hits(
        budget,
        result.hits,
        query.lines_per_hit,
        more_hint="raise max_tokens, lower k or lines_per_hit, or read an id",
    )
    return budget.render(cut)


ECHO_CHARS = 120  # of a query quoted back in a result's first line


def _echo(query: str) -> str:
    """The query quoted back, its start only: a pasted traceback is thousands of
    characters the caller already has, and the line must fit any budget."""
    flat = " ".join(query.split())
    return repr(flat if len(flat) <= ECHO_CHARS else flat[: ECHO_CHARS - 1] + "…")


def _grep(ws: Workspace, args: dict[str, Any]) -> str:
    query = from_tool(GrepQuery, args)
    pattern, corpus, timeout = query.pattern, query.corpus, query.timeout_s
    check_grep_pattern(pattern)
    result = _with_deadline(
        lambda: query.run(ws),
        timeout + GREP_GRACE_S,
        f"grep: no answer within {timeout:g} s; narrow it with path or a more specific pattern",
    )
    stopped = f"stopped early: {result.truncated}" if result.truncated else ""
    left_out = (
        f"[left out {counted(result.refused, 'file')} swapped after indexing for a link or "
        f"another file; `ctxkernel index {corpus}` re-indexes it]"
        if result.refused
        else ""
    )
    if not result.hits:
        text = f"No matches for /{pattern}/ in {corpus} ({counted(result.files_searched, 'file')})."
        if left_out:
            text += "\n" + left_out
        return text + (
            f"\n[cut: {stopped}; narrow with path or raise timeout_s]" if stopped else ""
        )
    budget = Budget(query.max_tokens)
    if left_out:
        budget.add(left_out)
    matches = sum(len(h.extra.get("matches", [])) for h in result.hits)
    budget.add(
        f"{counted(matches, 'matching line')} in {counted(len(result.hits), 'block')} for "
        f"/{pattern}/ in {corpus} ({counted(result.files_searched, 'file')}); match lines are "
        "marked 'N:'."
    )
    budget.add("")
    cut = _render_hits(
        budget,
        result.hits,
        10_000,
        marks=True,
        more_hint="narrow with path, lower context, raise max_tokens, or read an id",
    )
    if stopped:
        # the engine stopped first: say so before what the budget left out
        limit = "raise max_matches or timeout_s, or narrow with path"
        cut = f"{stopped} ({limit}); {cut}" if cut else f"{stopped}; {limit}"
    return budget.render(cut)


def check_grep_pattern(pattern: str) -> None:
    """ToolError for a regex that does not compile or repeats something already repeated
    (``(a+)+``, ``(\\w*)*``): whatever the engine, such patterns are never needed."""
    import re

    try:
        parsed = _sre_parse(pattern)
    except re.error as exc:
        raise ToolError(f"grep: bad regex {pattern!r}: {exc}") from None
    if parsed is not None and _nested_repeat(parsed):
        raise ToolError(
            f"grep: regex {pattern!r} repeats a group that itself repeats (like (a+)+ or "
            "(\\w+\\.)*); such nested quantifiers can take exponential time and are rejected. "
            "Rewrite it with one quantifier, e.g. [\\w.]+ instead of (\\w+\\.)+\\w+."
        )


def _sre_parse(pattern: str) -> Any:
    import re

    re.compile(pattern)
    try:
        import re._parser as sre  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - every supported Python has it
        return None
    return sre.parse(pattern)


def _nested_repeat(parsed: Any, inside: bool = False) -> bool:
    import re._constants as c  # type: ignore[import-not-found]

    for op, av in parsed:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            _, hi, sub = av
            repeats = hi > 1
            if repeats and inside:
                return True
            if _nested_repeat(sub, inside or repeats):
                return True
        elif op is c.SUBPATTERN:
            if _nested_repeat(av[-1], inside):
                return True
        elif op is c.BRANCH:
            if any(_nested_repeat(b, inside) for b in av[1]):
                return True
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if _nested_repeat(av[1], inside):
                return True
        elif op is getattr(c, "ATOMIC_GROUP", None) and _nested_repeat(av, inside):
            return True
    return False


def _with_deadline(fn: Callable[[], Any], seconds: float, message: str) -> Any:
    """Run ``fn`` in a worker thread; ToolError if it is still running after ``seconds``."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=target, name="ctxkernel-tool", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise ToolError(message)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _docs(ws: Workspace, args: dict[str, Any]) -> str:
    query = from_tool(DocsQuery, args)
    topic = query.topic
    result = query.run(ws)
    budget = Budget(query.max_tokens)
    if result.best is None:
        text = f"No definition or section found for {topic!r}."
        if result.hint:
            text += f" {result.hint}."
        elif result.suggestions:
            text += " Did you mean: " + ", ".join(result.suggestions) + "?"
        if not result.alternatives:
            return text + ("" if result.hint else " Try search(query=...) with other words.")
        budget.add(text)
        budget.add("Related by name, not its documentation (read any id):")
        shown = budget.add_lines(
            [
                f"- {h.id}  {h.chunk.symbol or h.chunk.title.strip('# ')}"
                for h in result.alternatives
            ]
        )
        left = len(result.alternatives) - shown
        return budget.render(f"{counted(left, 'alternative')} not shown" if left else "")
    if result.hint:
        budget.add(f"Note: {result.hint}.")
    best = result.best
    c = best.chunk
    how = {"exact": "exact name", "name": "name", "search": "closest text match"}.get(
        result.how, result.how
    )
    budget.add(
        f"docs {topic!r}: best match by {how}" + (f" for {result.arch}." if result.arch else ".")
    )
    budget.add_lines(_hit_header(1, best))
    # the links come after the section but are kept: room for them is held back first
    # ids only (read gives an id's upstream URL), and room held for them before the
    # section's text: a small budget shows fewer lines of the section, not fewer links
    used = sum(n + 1 for n in tokens.count(budget.parts))
    room = max(0, budget.limit - used - 40)
    link_lines: list[str] = []
    for per_group in (3, 2, 1):  # fewer per group before fewer groups
        link_lines = render_lines(pick(result.links, per_group), result.links_total, urls=False)
        if sum(n + 1 for n in tokens.count(link_lines)) + 2 <= room:
            break
    # + a margin: the budget counts a line's newline and rounds its lines up
    need = sum(n + 2 for n in tokens.count(link_lines)) + 8 if link_lines else 0
    reserve = min(room, need)
    budget.limit -= reserve
    body = _numbered(c.text.splitlines(), c.start_line)
    n = budget.add_lines(body)
    budget.limit += reserve
    if link_lines:
        budget.add("")
        budget.add_lines(link_lines)
    tail: list[str] = []
    if result.alternatives:
        tail.append("Alternatives (read any id):")
        for h in result.alternatives:
            label = h.chunk.symbol or h.chunk.title.strip("# ")
            tail.append(f"- {h.id}  {label}  {h.chunk.url or ''}".rstrip())
    if result.suggestions:
        tail.append("Did you mean: " + ", ".join(result.suggestions))
    if n < len(body):
        last = c.start_line + n
        return budget.render(
            f"lines {last}-{c.end_line} of the best match and "
            f"{counted(len(result.alternatives), 'alternative')} not shown; read "
            f"{c.corpus}:{c.path}:{last}-{c.end_line}"
        )
    budget.add("")
    shown = budget.add_lines(tail)
    if shown < len(tail):
        return budget.render(f"{counted(len(tail) - shown, 'line')} of alternatives not shown")
    return budget.render()


def _read(ws: Workspace, args: dict[str, Any]) -> str:
    query = from_tool(ReadQuery, args)
    corpus, path, start, end = _safe_ref(query.ref.strip())
    start = query.start_line or start
    end = query.end_line or end
    if start is not None and end is not None and end < start:
        raise ToolError(f"read: end_line {end} is before start_line {start}")
    rng = ws.read(f"{corpus}:{path}", start, end)
    budget = Budget(query.max_tokens)
    budget.add(f"{rng.corpus}:{rng.path}:{rng.start_line}-{rng.end_line} of {rng.total_lines}")
    budget.add(f"url: {rng.url or '(no upstream link for this corpus)'}")
    if rng.source == "chunks":
        budget.add("(rebuilt from the index: the file is not on this machine)")
    n = budget.add_lines(_numbered(rng.lines, rng.start_line))
    if n < len(rng.lines):
        nxt = rng.start_line + n
        # the header names what is shown (never longer than the one it replaces)
        shown_end = max(rng.start_line, nxt - 1)
        budget.parts[0] = (
            f"{rng.corpus}:{rng.path}:{rng.start_line}-{shown_end} of {rng.total_lines}"
        )
        if "#L" in rng.url:
            budget.parts[1] = f"url: {rng.url.split('#L')[0]}#L{rng.start_line}-L{shown_end}"
        return budget.render(
            f"lines {nxt}-{rng.end_line} not shown; read {rng.corpus}:{rng.path}:{nxt}-{rng.end_line} "
            "or raise max_tokens"
        )
    if rng.end_line < rng.total_lines:
        budget.add(
            f"(file continues: read {rng.corpus}:{rng.path}:{rng.end_line + 1}-{rng.total_lines})"
        )
    return budget.render()


def _safe_ref(ref: str) -> tuple[str, str, int | None, int | None]:
    """Split a ref and refuse anything that is not a plain relative path inside a corpus."""
    try:
        corpus, path, start, end = parse_chunk_id(ref)
    except UserError as exc:
        raise ToolError(f"read: {exc}") from None
    parts = PurePosixPath(path).parts
    if (
        path.startswith(("/", "~", "\\"))
        or (len(path) > 1 and path[1] == ":")
        or "\\" in path
        or "\0" in path
        or any(p in ("..", ".") for p in parts)
    ):
        raise ToolError(
            f"read: {path!r} is not a corpus path: give the path inside the corpus as search "
            "and grep print it (no '..', no absolute or home paths)"
        )
    return corpus, path, start, end


def _list_corpora(ws: Workspace, args: dict[str, Any]) -> str:
    budget = Budget(from_tool(ListCorporaQuery, args).max_tokens)
    statuses = ws.status(check_upstream=False)
    if not statuses:
        return "No corpora are defined or indexed."
    budget.add("Corpora (pass a name as `corpus` to search, grep and docs):")
    lines: list[str] = []
    for st in statuses:
        desc = " ".join(st.description.split())
        if len(desc) > 200:
            desc = desc[:199] + "…"
        r = st.record
        if st.error and r is None:
            lines.append(f"- {st.name}: its definition does not load: {st.error}")
            continue
        if r is None:
            lines.append(f"- {st.name}: {desc} (not indexed: `ctxkernel index {st.name}`)")
            continue
        when = time.strftime("%Y-%m-%d", time.gmtime(r.indexed_at)) if r.indexed_at else "?"
        state = "" if r.complete else "; incomplete (index again)"
        ref = f" ({r.ref})" if r.ref and r.ref != r.version else ""
        lines.append(
            f"- {st.name}: {desc}\n  indexed {when}: {counted(r.files, 'file')}, "
            f"{counted(r.chunks, 'chunk')}, "
            f"{r.source_kind} version {r.version[:12]}{ref}{state}"
        )
    n = budget.add_lines(lines)
    if n < len(lines):
        return budget.render(
            f"{counted(len(lines) - n, 'more corpus', 'more corpora')} not shown; raise max_tokens"
        )
    return budget.render()


SEARCH = Tool(
    name="search",
    description="""\
Search the local index of GPU-kernel references — CUTLASS/CuTe/CuTeDSL sources and \
examples, Triton sources and tutorials, the PTX ISA manual — by meaning and by name \
(hybrid BM25 + embeddings, with definitions of a named symbol ranked first).

Use it first when you need to know how something is done or where an API is defined: \
plain-language questions ("TMA load into shared memory with an mbarrier", "how to time a \
kernel and get the median") and identifiers (make_tiled_copy, tl.dot, \
cp.async.bulk.tensor) both work. For an exact regex use grep; for the documentation of \
one known name use docs.

Returns up to k hits, best first, each with its id corpus:path:start-end, its upstream \
URL and its numbered lines (at most lines_per_hit). Cite hits by id; pass an id to read \
for the surrounding lines. Output is cut to max_tokens with a closing [cut: ...] note.

Examples: {"query": "swizzle shared memory layout to avoid bank conflicts", "corpus": \
"cutlass", "k": 5}; {"query": "do_bench", "corpus": "triton", "kind": "source"}; \
{"query": "wgmma accumulate fp32", "corpus": "ptx", "mode": "lexical"}""",
    input_schema=tool_schema(SearchQuery),
    handler=_search,
)

GREP = Tool(
    name="grep",
    description="""\
Regex search over every file of one indexed corpus (ripgrep syntax, one line at a time), \
like `rg -C N PATTERN`. Use it to find every use or the exact spelling of an identifier, \
an error message, an instruction variant, or a string search ranked results might miss.

Returns the matching blocks in path order, each with its id corpus:path:start-end, its \
upstream URL and numbered lines; matching lines are marked "N:" and context lines "N ". \
Stops after max_matches matching lines or timeout_s seconds and says so in a closing \
[cut: ...] note, as it does when max_tokens is reached.

Patterns that repeat a repeated group, like (a+)+ or (\\w+\\.)*, are rejected: write \
[\\w.]+ instead. Escape regex metacharacters in literal text (cp\\.async\\.bulk).

Examples: {"pattern": "def do_bench", "corpus": "triton", "context": 5}; {"pattern": \
"make_tiled_copy\\\\(", "corpus": "cutlass", "path": "include/cute/**"}; {"pattern": \
"mbarrier\\\\.try_wait", "corpus": "ptx", "ignore_case": true}""",
    input_schema=tool_schema(GrepQuery),
    handler=_grep,
)

DOCS = Tool(
    name="docs",
    description="""\
Look up the documentation of one name: a PTX instruction or directive \
(wgmma.mma_async, cp.async.bulk.tensor, mbarrier.try_wait, ldmatrix, .reqntid), a Triton \
API (tl.dot, triton.testing.do_bench) or a CuTe/CuTeDSL name (cute.make_layout, \
make_tiled_copy). Exact names resolve from the symbol table, so this is faster and more \
precise than search when you know what the thing is called.

Returns the section or definition that documents the name (its id, upstream URL and \
numbered text), then for a PTX instruction what implements and uses it (CuTe C++ atoms, \
CuTeDSL ops, Triton/Gluon intrinsics, examples) by id, then close alternatives by id, \
and spelling suggestions when nothing has that name. Pass arch (sm_90) to drop what the \
target cannot run.

Examples: {"topic": "tl.dot"}; {"topic": "wgmma.mma_async", "corpus": "ptx"}; \
{"topic": "make_tiled_copy", "corpus": "cutlass", "alternatives": 10}""",
    input_schema=tool_schema(DocsQuery),
    handler=_docs,
)

READ = Tool(
    name="read",
    description="""\
Read lines of an indexed file, by the id that search, grep and docs print \
(corpus:path:start-end) or by corpus:path. Use it to see the code around a hit, a whole \
function or the rest of a file. Only files of indexed corpora can be read: no absolute \
paths, no '..'.

Returns the numbered lines with the file's total line count and the upstream URL of the \
range. Long ranges are cut at a line boundary to max_tokens; the closing [cut: ...] note \
gives the id of the rest.

Examples: {"ref": "cutlass:include/cute/atom/copy_atom.hpp:120-180"}; \
{"ref": "triton:python/triton/testing.py", "start_line": 90, "end_line": 160}""",
    input_schema=tool_schema(ReadQuery),
    handler=_read,
)

LIST_CORPORA = Tool(
    name="list_corpora",
    description="""\
List the corpora this index knows: name, what it holds, whether it is indexed, how many \
files and chunks, which upstream version. Call it once to learn the names to pass as \
`corpus` to search, grep and docs (typically cutlass, triton, ptx).

Example: {}""",
    input_schema=tool_schema(ListCorporaQuery),
    handler=_list_corpora,
)
