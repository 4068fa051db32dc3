"""Pasted errors in every form people paste: does each form of a raise site's message
find the chunk that raises it?

usage::

    python bench/retrieval/error_forms.py --index-dir INDEX [--corpus cutlass --corpus triton ...]
        [--sample 120] [--seed 7] [--markdown | --json]

Every raise site of the indexed corpora (a ``raise``/``assert``/``static_assert``/``throw``
statement whose string literals hold at least ``MIN_WORDS`` words; ``raises.sites``
finds them) is rendered as a message with runtime values in its format fields and the
code between its literals, then pasted in each form of ``FORMS``: bare, the message with
its values, a whole Python traceback (someone else's paths, line numbers and frames),
an MLIR ``loc("...":258:0): error:`` diagnostic with a note, a compiler ``file:line:col:
error:`` line (nvcc's ``file.cu(84): error: static assertion failed with "..."`` for a
static_assert), the message wrapped at 60 columns under its type, cut off after two
thirds of its words, and inside a user's sentence. A site is found at rank r when the
r-th hit of ``ctxkernel search`` (hybrid, its corpus, k 10) is a chunk of its file that
holds a statement with the same literal words (the same message raised twice counts
either). Reports Recall@1 and Recall@10 per corpus and form. The renderers are plain
functions that ``tests/retrieval/test_error_forms.py`` uses too.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ctxkernel import raises

MIN_WORDS = 4  # literal words of a message worth pasting (shorter ones say too little)
_RAISE_TYPE = re.compile(r"\braise\s+(?:[\w.]+\.)?([A-Z]\w*)|\bthrow\s+(?:std::)?(\w+)")
_VALUES = ["128", "float16", "(64, 32)", "tensor<128x64xf16>", "3", "'acc'", "sm_90a", "fp8e4nv"]


@dataclass(frozen=True)
class Site:
    corpus: str
    path: str
    start: int  # the chunk's first line
    end: int
    statement: str
    kind: str  # raise, assert, static_assert, throw
    type: str  # the exception type a user would see
    pattern: tuple[str, ...]
    line: int = 0  # the raising statement's line in its file (0: unknown)
    function: str = ""  # the function the statement is in, as a frame names it


def statement_at(lines: list[str], i: int) -> str:
    """The statement that opens at line ``i``: it runs on while its brackets are open."""
    out: list[str] = []
    depth = 0
    for j in range(i, min(len(lines), i + raises.MAX_SITE_LINES)):
        out.append(lines[j])
        depth += raises._depth(lines[j])
        if depth <= 0 and not lines[j].rstrip().endswith("\\"):
            break
    return "\n".join(out)


def site_kind(statement: str) -> tuple[str, str]:
    """(kind, exception type) of a raising statement."""
    if "static_assert" in statement or "CUTE_STATIC_ASSERT" in statement:
        return "static_assert", "error"
    m = _RAISE_TYPE.search(statement)
    if m and m.group(1):
        return "raise", m.group(1)
    if m and m.group(2):
        return "throw", "RuntimeError"  # as a Python binding re-raises a C++ exception
    if re.search(r"\bassert\b", statement):
        return "assert", "AssertionError"
    return "raise", "RuntimeError"


def render_message(statement: str, rng: random.Random) -> str:
    """The message the statement raises, as a user sees it: its literals joined, each
    format field and each piece of code between two literals a runtime value."""
    parts: list[str] = []
    last_end = -1
    for m in raises._STRING.finditer(statement):
        if last_end >= 0 and statement[last_end : m.start()].strip() not in ("", "\\"):
            gap = statement[last_end : m.start()]
            if re.search(r"[\w)\]]", gap.replace("\\", "")):
                parts.append(rng.choice(_VALUES))
        body = m.group("body")
        prefix = (m.group("prefix") or "").lower()
        if "f" in prefix or "{" in body or "%" in body:
            body = raises._FIELD.sub(lambda _: rng.choice(_VALUES), body)
        body = body.replace("\\n", " ").replace('\\"', '"').replace("\\'", "'")
        parts.append(body)
        last_end = m.end()
    return " ".join(" ".join(parts).split())


def literal_message(statement: str) -> str:
    """The message with its format fields left as the source spells them (bare form)."""
    parts = [m.group("body") for m in raises._STRING.finditer(statement)]
    return " ".join(" ".join(parts).replace("\\n", " ").split())


# --- the forms -----------------------------------------------------------------------------


def form_bare(site: Site, msg: str, rng: random.Random) -> str:
    return literal_message(site.statement)


def form_valued(site: Site, msg: str, rng: random.Random) -> str:
    return f"{site.type}: {msg}" if site.kind != "static_assert" else msg


def _user_frames(user: str, rng: random.Random) -> list[str]:
    """A traceback's frames of the user's own code, above the library's."""
    return [
        f'  File "/home/{user}/proj/train.py", line {rng.randint(10, 400)}, in <module>',
        "    main(args)",
        f'  File "/home/{user}/proj/kernels/attn.py", line {rng.randint(10, 900)}, in forward',
        "    out = fused_kernel[grid](q, k, v, o, BLOCK=128)",
    ]


def form_traceback(site: Site, msg: str, rng: random.Random) -> str:
    user = rng.choice(["alice", "bob", "jansel", "dev"])
    pkg = {"triton": "triton", "tilelang": "tilelang", "cutlass": "cutlass"}.get(site.corpus, "pkg")
    inner = site.path.split("/", 1)[-1] if "/" in site.path else site.path
    first = site.statement.strip().splitlines()[0].strip()
    return "\n".join(
        [
            "Traceback (most recent call last):",
            *_user_frames(user, rng),
            f'  File "/opt/conda/lib/python3.11/site-packages/{pkg}/{inner}", '
            f"line {rng.randint(10, 3000)}, in {rng.choice(['_call', 'visit', 'wrapper'])}",
            f"    {first}",
            f"{site.type}: {msg}" if site.kind != "static_assert" else f"RuntimeError: {msg}",
        ]
    )


_CXX = re.compile(r"\.(?:hpp|h|hh|cuh|cu|cpp|cc|cxx|c|inl|ipp)$")


def installed_path(site: Site, user: str) -> str:
    """Where a user's machine holds the site's file: a Python package's module under a
    virtualenv's site-packages (the source tree's folders above the package dropped), a
    header or source file of a checkout under a folder of their own."""
    if _CXX.search(site.path):
        return f"/home/{user}/deps/{site.corpus}/{site.path}"
    inner = re.sub(r"^(?:.*/)?(?:python|src)/(?:CuTeDSL/)?", "", site.path)
    if inner.startswith(("examples/", "tutorials/", "test/", "tests/", "benchmark")):
        return f"/home/{user}/src/{site.corpus}/{site.path}"  # run from a checkout
    return f"/home/{user}/.venv/lib/python3.10/site-packages/{inner}"


def form_frames(site: Site, msg: str, rng: random.Random) -> str:
    """The error as it really comes: a Python traceback whose user frames come first and
    whose deepest frame names the raising file and line under the user's prefix; for a
    C++ static_assert nvcc's diagnostic at the header's line, the user's file below it;
    for another C++ site a TVM-style frame naming the source file."""
    user = rng.choice(["alice", "bob", "jansel", "dev"])
    where = installed_path(site, user)
    line = site.line or site.start
    if site.kind == "static_assert":
        return "\n".join(
            [
                f'{where}({line}): error: static assertion failed with "{msg}"',
                "          detected during:",
                '            instantiation of "auto kernel<Tile>(Tile)" '
                f"at line {rng.randint(10, 400)} of /home/{user}/proj/kern.cu",
            ]
        )
    first = site.statement.strip().splitlines()[0].strip()
    if _CXX.search(site.path):
        return "\n".join(
            [
                "Traceback (most recent call last):",
                f'  File "/home/{user}/proj/run.py", line {rng.randint(10, 400)}, in <module>',
                "    mod = tilelang.compile(func)",
                f'  File "{where}", line {line}',
                f"RuntimeError: {msg}",
            ]
        )
    function = site.function or rng.choice(["_call", "visit", "wrapper"])
    return "\n".join(
        [
            "Traceback (most recent call last):",
            *_user_frames(user, rng),
            f'  File "{where}", line {line}, in {function}',
            f"    {first}",
            f"{site.type}: {msg}",
        ]
    )


def form_mlir(site: Site, msg: str, rng: random.Random) -> str:
    where = f'loc("/home/user/kern.py":{rng.randint(10, 900)}:{rng.randint(0, 40)})'
    return (
        f"{where}: error: {msg}\n"
        f'{where}: note: see current operation: %12 = "cute.copy"(%3, %4) : '
        "(!cute.memref<f16>, !cute.memref<f16>) -> ()"
    )


def form_diag(site: Site, msg: str, rng: random.Random) -> str:
    line, col = rng.randint(10, 900), rng.randint(1, 40)
    if site.kind == "static_assert":
        return f'/tmp/build/kern.cu({line}): error: static assertion failed with "{msg}"'
    return f"/home/user/kern.py:{line}:{col}: error: {msg}"


def form_wrapped(site: Site, msg: str, rng: random.Random) -> str:
    text = f"{site.type}: {msg}" if site.kind != "static_assert" else f"error: {msg}"
    return "\n".join(textwrap.wrap(text, 60))


def form_cut(site: Site, msg: str, rng: random.Random) -> str:
    words = msg.split()
    keep = max(MIN_WORDS - 1, (2 * len(words) + 2) // 3)
    return f"{site.type}: " + " ".join(words[:keep])


def form_prose(site: Site, msg: str, rng: random.Random) -> str:
    opener = rng.choice(
        [
            "my kernel stopped compiling after the upgrade and fails with",
            "running the example on an H100 I get",
            "this used to work but now it dies with",
        ]
    )
    return f"{opener}\n{site.type}: {msg}\nwhat does this mean and how do I fix it?"


FORMS: dict[str, Callable[[Site, str, random.Random], str]] = {
    "bare": form_bare,
    "valued": form_valued,
    "traceback": form_traceback,
    "frames": form_frames,
    "mlir": form_mlir,
    "diag": form_diag,
    "wrapped": form_wrapped,
    "cut": form_cut,
    "prose": form_prose,
}


# --- sites of an index -----------------------------------------------------------------------


def corpus_sites(cache: object, corpus: str) -> list[Site]:
    """Every raising site with enough literal words, one per distinct message."""
    out: list[Site] = []
    seen: set[tuple[str, ...]] = set()
    rows = cache.iter_rows("path, start_line, end_line, text, symbol")  # type: ignore[attr-defined]
    for path, start, end, text, symbol in rows:
        lines = text.splitlines()
        function = (symbol or "").split(",")[0].strip().rsplit(".", 1)[-1].rsplit("::", 1)[-1]
        for s in raises.sites(text):
            if not s.raising:
                continue
            literal = tuple(p for p in s.pattern if p != raises.WILD)
            if len(literal) < MIN_WORDS or literal in seen:
                continue
            seen.add(literal)
            statement = statement_at(lines, s.line)
            kind, etype = site_kind(statement)
            line = start + s.line
            out.append(
                Site(corpus, path, start, end, statement, kind, etype, s.pattern, line, function)
            )
    return out


def holders(cache: object) -> dict[tuple[str, ...], set[str]]:
    """Literal words of a raising statement -> the paths that raise it."""
    out: dict[tuple[str, ...], set[str]] = {}
    for path, text in cache.iter_rows("path, text"):  # type: ignore[attr-defined]
        for s in raises.sites(text):
            literal = tuple(p for p in s.pattern if p != raises.WILD)
            if s.raising and len(literal) >= MIN_WORDS:
                out.setdefault(literal, set()).add(path)
    return out


def found_rank(hits: Sequence[Any], site: Site, paths: set[str]) -> int:
    literal = tuple(p for p in site.pattern if p != raises.WILD)
    for rank, hit in enumerate(hits, 1):
        c = hit.chunk
        if c.path not in paths:
            continue
        for s in raises.sites(c.text):
            if tuple(p for p in s.pattern if p != raises.WILD) == literal:
                return rank
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--corpus", action="append", default=[])
    ap.add_argument("--sample", type=int, default=120, help="sites per corpus (0: all)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from ctxkernel import Workspace

    ws = Workspace(args.index_dir)
    corpora = args.corpus or [c for c in ws.store.corpora() if c != "ptx"]
    forms = [f for f in args.forms.split(",") if f]
    rows = []
    for corpus in corpora:
        cache = ws.store.synced_cache(corpus)
        sites = corpus_sites(cache, corpus)
        held = holders(cache)
        rng = random.Random(args.seed)
        total = len(sites)
        if args.sample and len(sites) > args.sample:
            sites = rng.sample(sites, args.sample)
        counts = {f: [0, 0, 0] for f in forms}  # found@1, found@10, n
        t0 = time.perf_counter()
        for site in sites:
            literal = tuple(p for p in site.pattern if p != raises.WILD)
            paths = held.get(literal, {site.path})
            msg = render_message(site.statement, random.Random(f"{args.seed}:{site.path}"))
            for form in forms:
                query = FORMS[form](site, msg, random.Random(f"{args.seed}:{form}:{site.path}"))
                hits = ws.search(query, corpora=[corpus], k=10).hits
                r = found_rank(hits, site, paths)
                c = counts[form]
                c[0] += r == 1
                c[1] += r > 0
                c[2] += 1
        took = time.perf_counter() - t0
        for form, (at1, at10, n) in counts.items():
            rows.append(
                {
                    "type": "error_form",
                    "corpus": corpus,
                    "form": form,
                    "sites": total,
                    "n": n,
                    "recall@1": round(at1 / n, 3) if n else 0.0,
                    "recall@10": round(at10 / n, 3) if n else 0.0,
                    "seconds": round(took, 1),
                }
            )
    if args.json:
        for row in rows:
            print(json.dumps(row))
    elif args.markdown:
        print("| corpus | sites | n | " + " | ".join(forms) + " |")
        print("|---|---|---|" + "---|" * len(forms))
        for corpus in corpora:
            mine = {r["form"]: r for r in rows if r["corpus"] == corpus}
            first = mine[forms[0]]
            cells = [f"{mine[f]['recall@1']:.3f} / {mine[f]['recall@10']:.3f}" for f in forms]
            print(f"| {corpus} | {first['sites']} | {first['n']} | " + " | ".join(cells) + " |")
    else:
        for row in rows:
            print(
                f"{row['corpus']:9} {row['form']:10} n={row['n']:<4} "
                f"R@1 {row['recall@1']:.3f} R@10 {row['recall@10']:.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
