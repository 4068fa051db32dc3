"""Warm search latency through the MCP server, measured with the official MCP client.

Spawns ``python -m ctxkernel mcp --index-dir INDEX`` once per code tree (this checkout,
and a baseline given by ``--baseline ROOT``: a checkout such as main, or a git revision of
this repository), warms each (the embedding model and every corpus's caches load), then
sends the same ``search`` calls to every server in turn — query by query, alternating which
server goes first — so a busy machine slows them alike. Reports p50/p95/mean of the
client-side wall time of each ``call_tool`` per server, as JSON Lines and, with
``--markdown``, a table.

    python bench/indexing/mcp_latency.py --index-dir INDEX --baseline MAIN_CHECKOUT \\
        --queries bench/queries/eval-dev.jsonl --queries bench/queries/eval-test.jsonl -n 120

``--baseline-index-dir`` gives the baseline server its own index (same corpora and mirror
commits) where the store format changed between the two trees. Queries go to all indexed corpora (no ``corpus`` argument) with k=10 unless
``--per-corpus`` sends each query's own corpus.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.append(str(Path(__file__).resolve().parents[2]))  # bench.baseline
from bench import baseline

ROOT = Path(__file__).resolve().parents[2]


def load_queries(files: list[str]) -> list[dict[str, Any]]:
    out = []
    for f in files:
        for line in Path(f).read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("//"):
                row = json.loads(line)
                out.append({"query": row["query"], "corpus": row["corpus"]})
    return out


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def commit_of(root: Path) -> str:
    mark = root / baseline.MARK  # a tree read out of git: no .git, the commit written beside it
    if mark.is_file():
        return mark.read_text().strip()[:7]
    try:
        return subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


async def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    trees = [("this", ROOT)] + (
        [("baseline", baseline.tree(args.baseline))] if args.baseline else []
    )
    queries = load_queries(args.queries)
    random.Random(args.seed).shuffle(queries)
    queries = queries[: args.n]
    times: dict[str, list[float]] = {name: [] for name, _ in trees}
    errors: dict[str, int] = {}
    async with AsyncExitStack() as stack:
        sessions: dict[str, ClientSession] = {}
        for name, root in trees:
            env = baseline.env_for(root, {**os.environ, "HF_HUB_OFFLINE": "1"})
            index = (
                args.baseline_index_dir
                if name == "baseline" and args.baseline_index_dir
                else args.index_dir
            )
            params = StdioServerParameters(
                command=sys.executable,
                args=["-m", "ctxkernel", "mcp", "--index-dir", str(Path(index).resolve())],
                env=env,
                cwd=str(root),
            )
            errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions[name] = session
        for session in sessions.values():  # warm: model, caches, every corpus
            for corpus in sorted({q["corpus"] for q in queries}):
                await session.call_tool("search", {"query": "warm up", "corpus": corpus})
            for q in queries[: args.warm]:
                await session.call_tool("search", _args(q, args))
        order = list(sessions)
        for i, q in enumerate(queries):
            turn = order if i % 2 == 0 else order[::-1]
            for name in turn:
                t = time.perf_counter()
                result = await sessions[name].call_tool("search", _args(q, args))
                times[name].append((time.perf_counter() - t) * 1000)
                if result.is_error:
                    text = " ".join(b.text for b in result.content if b.type == "text")
                    errors[name] = errors.get(name, 0) + 1
                    print(f"{name}: {q['query'][:60]!r}: {text[:200]}", file=sys.stderr)
    rows = []
    for name, root in trees:
        ms = times[name]
        rows.append(
            {
                "type": "latency",
                "server": name,
                "commit": commit_of(root),
                "n": len(ms),
                "p50_ms": round(pct(ms, 0.5), 1),
                "p95_ms": round(pct(ms, 0.95), 1),
                "mean_ms": round(statistics.fmean(ms), 1),
                "per_corpus": args.per_corpus,
                "errors": errors.get(name, 0),
            }
        )
    return rows


def _args(q: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"query": q["query"], "k": 10}
    if args.per_corpus:
        out["corpus"] = q["corpus"]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index-dir", required=True)
    p.add_argument(
        "--baseline", help="another checkout's root (or a git revision) to measure beside this one"
    )
    p.add_argument(
        "--baseline-index-dir",
        help="the baseline's own index (a tree from before a store format change cannot read ours)",
    )
    p.add_argument("--queries", action="append", required=True)
    p.add_argument("-n", type=int, default=100, help="queries sampled (seeded)")
    p.add_argument("--warm", type=int, default=5, help="untimed searches per server first")
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--per-corpus", action="store_true")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    if not Path(args.index_dir).is_dir():
        print(f"mcp_latency: {args.index_dir}: no such index directory", file=sys.stderr)
        raise SystemExit(2)
    rows = anyio.run(measure, args)
    for r in rows:
        print(json.dumps(r))
    if args.markdown:
        print("\n| server | commit | n | p50 ms | p95 ms | mean ms |\n|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['server']} | {r['commit']} | {r['n']} | {r['p50_ms']} | "
                f"{r['p95_ms']} | {r['mean_ms']} |"
            )


if __name__ == "__main__":
    main()
