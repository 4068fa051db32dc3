"""Search identity: this tree's results are those of a baseline tree, query for query.

A speed change to the search path must not move a single result. For every query of the
given files, each tree (this checkout and ``--baseline ROOT``, a checkout or a git revision
of this repository, each imported from its own root in its own process, on the same index)
records, per mode, the top-10 hit ids of ``Workspace.search`` over all indexed corpora,
and the text the MCP ``search`` tool returns for the same query (``ToolSet.call``, what
``ctxkernel mcp`` sends back). The records are compared field by field; the first
differences are printed.

    python bench/retrieval/search_identity.py --index-dir INDEX --baseline MAIN_CHECKOUT \\
        --queries bench/queries/eval-dev.jsonl --queries bench/queries/eval-test.jsonl

Exit 0 when every record is identical, 1 when any differs, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# bench.baseline; appended, so the worker's ctxkernel is still the one PYTHONPATH puts first
sys.path.append(str(Path(__file__).resolve().parents[2]))
from bench import baseline

ROOT = Path(__file__).resolve().parents[2]
MODES = ("hybrid", "lexical", "dense")


def load_queries(files: list[str]) -> list[str]:
    out: list[str] = []
    for f in files:
        for line in Path(f).read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("//"):
                out.append(json.loads(line)["query"])
    return list(dict.fromkeys(out))


def record(index_dir: str, queries: list[str], modes: list[str], out: Path) -> None:
    """The worker: one JSON line per (query, mode) from the ctxkernel on ``sys.path``."""
    from ctxkernel.tools import ToolSet
    from ctxkernel.workspace import Workspace

    ws = Workspace(index_dir)
    tools = ToolSet(ws)
    with out.open("w") as fh:
        for q in queries:
            for mode in modes:
                hits = ws.search(q, k=10, mode=mode).hits
                result = tools.call("search", {"query": q, "k": 10, "mode": mode})
                row = {
                    "query": q,
                    "mode": mode,
                    "ids": [h.id for h in hits],
                    "tool": result.text,
                    "error": result.is_error,
                }
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_tree(root: Path, args: argparse.Namespace, queries: list[str], out: Path) -> None:
    qfile = out.with_suffix(".queries.json")
    qfile.write_text(json.dumps(queries))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    cmd = [
        str(Path(__file__).resolve()),
        "--worker",
        str(out),
        "--index-dir",
        args.index_dir,
        "--query-file",
        str(qfile),
        "--modes",
        args.modes,
    ]
    baseline.run(root, cmd, env=env, capture=False)


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]], show: int) -> dict[str, int]:
    counts = {"records": len(a), "ids_differ": 0, "tool_text_differs": 0}
    shown = 0
    for x, y in zip(a, b, strict=True):
        assert (x["query"], x["mode"]) == (y["query"], y["mode"])
        ids = x["ids"] != y["ids"]
        text = x["tool"] != y["tool"] or x["error"] != y["error"]
        counts["ids_differ"] += ids
        counts["tool_text_differs"] += text
        if ids or text:
            key = f"differ_{x['mode']}"
            counts[key] = counts.get(key, 0) + 1
        if (ids or text) and shown < show:
            shown += 1
            print(f"differs ({x['mode']}): {x['query'][:80]!r}", file=sys.stderr)
            if ids:
                print(f"  this:     {x['ids']}\n  baseline: {y['ids']}", file=sys.stderr)
            elif text:
                for i, (la, lb) in enumerate(
                    zip(x["tool"].splitlines(), y["tool"].splitlines(), strict=False)
                ):
                    if la != lb:
                        print(f"  line {i}: {la[:100]!r} != {lb[:100]!r}", file=sys.stderr)
                        break
                else:
                    print("  texts differ in length", file=sys.stderr)
    return counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index-dir", required=True)
    p.add_argument(
        "--baseline", help="the checkout (or a git revision) whose results must be matched"
    )
    p.add_argument("--queries", action="append", default=[])
    p.add_argument("--modes", default="hybrid", help="comma-separated: hybrid,lexical,dense")
    p.add_argument("--show", type=int, default=10, help="differences printed")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--query-file", help=argparse.SUPPRESS)
    args = p.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if args.worker:
        queries = json.loads(Path(args.query_file).read_text())
        record(args.index_dir, queries, modes, Path(args.worker))
        return
    bad = [m for m in modes if m not in MODES]
    if not Path(args.index_dir).is_dir() or not args.baseline or not args.queries or bad:
        print(
            "search_identity: needs --index-dir DIR, --baseline ROOT, --queries FILE "
            f"and modes among {', '.join(MODES)}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    queries = load_queries(args.queries)
    with tempfile.TemporaryDirectory(prefix="search-identity-") as tmp:
        outs = []
        for name, root in (("this", ROOT), ("baseline", baseline.tree(args.baseline))):
            out = Path(tmp) / f"{name}.jsonl"
            run_tree(root, args, queries, out)
            outs.append([json.loads(line) for line in out.read_text().splitlines()])
    counts = compare(outs[0], outs[1], args.show)
    same = not counts["ids_differ"] and not counts["tool_text_differs"]
    print(json.dumps({"type": "identity", "queries": len(queries), "modes": modes, **counts,
                      "identical": same}))  # fmt: skip
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
