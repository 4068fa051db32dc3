"""Retrieval benchmarks: index throughput and where the time goes, store size, no-op
re-index, search latency (warm, in process), grep against plain ripgrep on the same
files, and the embedding policy against the naive baseline on the same files.

Every number is measured in one run on this machine; comparisons are ratios against a
baseline measured in the same run (the machines are shared and noisy).

usage:
  python bench/indexing/index_bench.py                      # installed-package corpora only
  python bench/indexing/index_bench.py --cutlass DIR --triton DIR --ptx DIR
                                                    # plus local mirrors (git repos or dirs)
  python bench/indexing/index_bench.py --policy-sample 120  # files of cutlass for the before/after

Prints a Markdown report (paste it into bench/RESULTS.md) and writes JSON with --out.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SEARCH_QUERIES = [
    "how do I partition a tensor across threads with a tiled copy",
    "TMA load into shared memory with an mbarrier",
    "make_tiled_copy",
    "local_tile",
    "do_bench",
    "tl.dot",
    "persistent matmul kernel with a tile scheduler",
    "software pipelining with multiple stages",
    "wgmma.mma_async",
    "cp.async.bulk.tensor",
    "how to compute softmax of each row",
    "fp8 block scaled matmul",
    "warp specialization producer consumer",
    "swizzle shared memory layout to avoid bank conflicts",
    "autotune configurations for block sizes",
    "mbarrier try_wait parity",
    "epilogue store to global memory",
    "layout composition and complement",
    "num_warps num_stages",
    "ldmatrix",
]
GREP_PATTERNS = [
    r"make_tiled_copy",
    r"def do_bench",
    r"mbarrier\.try_wait",
    r"cp\.async\.bulk",
    r"class \w+Layout",
]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def dir_size(path: Path) -> int:
    """Bytes under a folder, or of a file (and its SQLite -wal/-shm companions)."""
    if path.is_file():
        return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def fresh_home(base: Path, name: str) -> Path:
    home = base / name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return home


def use_home(home: Path) -> None:
    os.environ["CTXKERNEL_HOME"] = str(home)


def index_once(name: str, source: str) -> dict[str, Any]:
    from ctxkernel import Workspace

    ws = Workspace()
    t = time.perf_counter()
    report = ws.index(name, source=source)
    wall = time.perf_counter() - t
    secs = report.seconds
    embed_s = secs.get("embed", 0.0) + secs.get("embed-lookup", 0.0)
    return {
        "corpus": name,
        "source": source,
        "wall_s": round(wall, 1),
        "files": report.files_total,
        "changed": report.files_changed,
        "chunks": report.chunks_total,
        "embedded": report.embedded,
        "reused": report.embeddings_reused,
        "files_per_s": round(report.files_changed / wall, 1) if wall else 0,
        "chunks_per_s": round(report.chunks_written / wall, 1) if wall else 0,
        "embed_share": round(embed_s / wall, 2) if wall else 0,
        "stages_s": {k: round(v, 1) for k, v in secs.items()},
        "skipped": report.skipped,
    }


def bench_index(base: Path, corpora: list[tuple[str, str]]) -> dict[str, Any]:
    from ctxkernel import Workspace

    home = fresh_home(base, "main")
    use_home(home)
    out: dict[str, Any] = {"cold": [], "noop": []}
    for name, source in corpora:
        print(f"[bench] cold index {name} from {source}", file=sys.stderr, flush=True)
        out["cold"].append(index_once(name, source))
    for name, source in corpora:
        print(f"[bench] no-op re-index {name}", file=sys.stderr, flush=True)
        out["noop"].append(index_once(name, source))
    ws = Workspace()
    out["store_bytes"] = {
        "chroma": dir_size(ws.store.index_dir / "chroma"),
        "lexical": dir_size(ws.store.index_dir / "lexical"),
        "embeddings_cache": dir_size(ws.store.index_dir / "embeddings.sqlite"),
    }
    return out


def bench_search(rounds: int = 3) -> dict[str, Any]:
    from ctxkernel import Workspace

    ws = Workspace()
    ws.search("warm up the model and caches", k=10)
    result: dict[str, Any] = {}
    for mode in ("hybrid", "lexical", "dense"):
        times: list[float] = []
        for _ in range(rounds):
            for q in SEARCH_QUERIES:
                for e in ws.searcher._by_key.values():
                    e._queries.clear()  # time the query's embedding too, every time
                t = time.perf_counter()
                ws.search(q, k=10, mode=mode)
                times.append((time.perf_counter() - t) * 1000)
        result[mode] = {
            "p50_ms": round(pct(times, 0.5), 1),
            "p95_ms": round(pct(times, 0.95), 1),
            "n": len(times),
        }
    docs_times = []
    for topic in (
        "tl.dot",
        "make_tiled_copy",
        "wgmma.mma_async",
        "cute.make_layout",
        "triton.testing.do_bench",
        ".reqntid",
    ):
        ws.docs(topic)
        for _ in range(5):
            t = time.perf_counter()
            ws.docs(topic)
            docs_times.append((time.perf_counter() - t) * 1000)
    result["docs_exact"] = {
        "p50_ms": round(pct(docs_times, 0.5), 1),
        "p95_ms": round(pct(docs_times, 0.95), 1),
        "n": len(docs_times),
    }
    return result


def bench_grep(corpus: str, repeats: int = 5) -> dict[str, Any]:
    """ctxkernel's grep (in process, and as a CLI process) against plain rg on the same files."""
    from ctxkernel import Workspace
    from ctxkernel.grep import find_rg

    ws = Workspace()
    rg = find_rg()
    assert rg, "ripgrep is needed for this benchmark"
    files = [e.local for e in ws.store.cache(corpus).files().values() if e.local]
    rows = []
    for pattern in GREP_PATTERNS:
        ours, plain, cli = [], [], []
        for _ in range(repeats):
            t = time.perf_counter()
            ws.grep(corpus, pattern, max_results=100_000)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            # plain rg as a person would run it over the same files: line numbers, names
            subprocess.run(
                [
                    rg,
                    "--no-config",
                    "-n",
                    "--with-filename",
                    "--color",
                    "never",
                    "-e",
                    pattern,
                    "--",
                    *files,
                ],
                capture_output=True,
            )
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ctxkernel",
                    "grep",
                    pattern,
                    "--corpus",
                    corpus,
                    "--json",
                    "--max-count",
                    "100000",
                ],
                capture_output=True,
            )
            cli.append(time.perf_counter() - t)
        rows.append(
            {
                "pattern": pattern,
                "ours_ms": round(statistics.median(ours) * 1000, 1),
                "rg_ms": round(statistics.median(plain) * 1000, 1),
                "ratio": round(statistics.median(ours) / statistics.median(plain), 2),
                "cli_ms": round(statistics.median(cli) * 1000, 1),
            }
        )
    return {"corpus": corpus, "files": len(files), "patterns": rows}


def bench_policy(base: Path, cutlass_src: str, sample: int) -> dict[str, Any]:
    """Naive (whole chunk text, 256 tokens) vs compact (kind-aware summaries, 128 tokens) on the same files."""
    src = Path(cutlass_src)
    sample_dir = base / "policy-sample"
    shutil.rmtree(sample_dir, ignore_errors=True)
    from ctxkernel.corpus import get_corpus

    corpus = get_corpus("cutlass")
    tracked = subprocess.run(
        ["git", "-C", str(src), "ls-files"], capture_output=True, text=True
    ).stdout.split()
    wanted = sorted(p for p in tracked if corpus.wants(p))
    step = max(1, len(wanted) // sample)
    chosen = wanted[::step][:sample]
    for rel in chosen:
        target = sample_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
    result: dict[str, Any] = {"files": len(chosen)}
    for label, env in (
        ("naive", {"CTXKERNEL_EMBED_TEXT": "full", "CTXKERNEL_EMBED_MAX_TOKENS": "256"}),
        ("compact", {"CTXKERNEL_EMBED_TEXT": "compact", "CTXKERNEL_EMBED_MAX_TOKENS": "128"}),
    ):
        use_home(fresh_home(base, f"policy-{label}"))
        os.environ.update(env)
        from ctxkernel import embed

        embed._MODELS.clear()
        print(f"[bench] policy {label}: {len(chosen)} files", file=sys.stderr, flush=True)
        result[label] = index_once("cutlass", f"dir:{sample_dir}")
    os.environ["CTXKERNEL_EMBED_TEXT"] = "compact"
    os.environ["CTXKERNEL_EMBED_MAX_TOKENS"] = "128"
    result["speedup_wall"] = round(result["naive"]["wall_s"] / result["compact"]["wall_s"], 2)
    result["speedup_embed"] = round(
        result["naive"]["stages_s"].get("embed", 0)
        / max(result["compact"]["stages_s"].get("embed", 1e-9), 1e-9),
        2,
    )
    return result


def search_in_fresh_process() -> dict[str, Any]:
    """Search latency in a new process on the index just built, as a CLI user or an MCP
    server sees it (this process carries the heap of every index run before it, which
    slows it by ~10 ms a query)."""
    import subprocess

    out = subprocess.run(
        [sys.executable, __file__, "--search-only"],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def source_label(source: str) -> str:
    """A source as the report shows it: no path of this machine in RESULTS.md."""
    if source.startswith(("pkg:", "http://", "https://")):
        return source
    return f"local mirror `{Path(source).name}`"


def machine() -> str:
    cpus = os.cpu_count()
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    except ImportError:
        gpu = "no torch"
    return f"{platform.node()} ({platform.machine()}, {cpus} cores, {gpu}, Python {platform.python_version()})"


def report_markdown(res: dict[str, Any]) -> str:
    lines = [f"### Retrieval benchmark — {res['date']} — {res['machine']}", ""]
    if "index" in res:
        lines += [
            "| corpus | source | files | chunks | embedded | wall s | files/s | chunks/s | embed share | stages (s) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in res["index"]["cold"]:
            stages = ", ".join(f"{k} {v}" for k, v in r["stages_s"].items())
            lines.append(
                f"| {r['corpus']} | {source_label(r['source'])} | {r['files']} | {r['chunks']} | {r['embedded']} | {r['wall_s']} | {r['files_per_s']} | {r['chunks_per_s']} | {r['embed_share']} | {stages} |"
            )
        lines += [
            "",
            "No-op re-index (nothing changed): "
            + ", ".join(f"{r['corpus']} {r['wall_s']} s" for r in res["index"]["noop"]),
            "",
        ]
        sizes = res["index"]["store_bytes"]
        lines.append("Store size: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items()))
        lines.append("")
    if "search" in res:
        lines += ["| search mode | p50 ms | p95 ms | n |", "|---|---|---|---|"]
        for mode, r in res["search"].items():
            lines.append(f"| {mode} | {r['p50_ms']} | {r['p95_ms']} | {r['n']} |")
        lines.append("")
    for g in res.get("grep", []):
        lines += [
            f"grep on {g['corpus']} ({g['files']} files): ours in process vs plain rg on the same files",
            "",
            "| pattern | ours ms | rg ms | ratio | ctxkernel grep CLI ms |",
            "|---|---|---|---|---|",
        ]
        for r in g["patterns"]:
            lines.append(
                f"| `{r['pattern']}` | {r['ours_ms']} | {r['rg_ms']} | {r['ratio']} | {r['cli_ms']} |"
            )
        lines.append("")
    if "policy" in res:
        p = res["policy"]
        lines += [
            f"Embedding policy on the same {p['files']} cutlass files: naive (whole chunk, 256 tokens) vs compact (kind-aware summary, 128 tokens)",
            "",
            "| policy | wall s | embed s | embedded | chunks |",
            "|---|---|---|---|---|",
        ]
        for label in ("naive", "compact"):
            r = p[label]
            lines.append(
                f"| {label} | {r['wall_s']} | {r['stages_s'].get('embed', 0)} | {r['embedded']} | {r['chunks']} |"
            )
        lines += ["", f"Speed-up: {p['speedup_wall']}x wall, {p['speedup_embed']}x embedding.", ""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cutlass", help="local mirror of NVIDIA/cutlass (git repo or directory)")
    ap.add_argument("--triton", help="local mirror of triton-lang/triton")
    ap.add_argument("--ptx", help="local PTX ISA page or a Markdown conversion repo")
    ap.add_argument("--no-packages", action="store_true", help="skip the installed-package corpora")
    ap.add_argument(
        "--policy-sample",
        type=int,
        default=0,
        help="files of --cutlass for the naive-vs-compact comparison",
    )
    ap.add_argument("--work", default=None, help="scratch dir (default: a temp dir)")
    ap.add_argument("--out", default=None, help="write the JSON results here")
    ap.add_argument("--search-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.search_only:  # the child of search_in_fresh_process, on CTXKERNEL_HOME
        print(json.dumps(bench_search()))
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    base = Path(args.work or tempfile.mkdtemp(prefix="ckbench-"))
    res: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "machine": machine()}
    if args.policy_sample and args.cutlass:
        res["policy"] = bench_policy(base, args.cutlass, args.policy_sample)
    corpora: list[tuple[str, str]] = []
    if not args.no_packages:
        corpora += [("triton", "pkg:triton"), ("cutlass", "pkg:nvidia-cutlass-dsl")]
    if args.cutlass or args.triton or args.ptx:
        # mirrors replace the package corpora of the same name
        corpora = [
            (n, s)
            for n, s in corpora
            if not ({"cutlass": args.cutlass, "triton": args.triton}.get(n))
        ]
        corpora += [
            (n, s)
            for n, s in (("cutlass", args.cutlass), ("triton", args.triton), ("ptx", args.ptx))
            if s
        ]
    res["index"] = bench_index(base, corpora)
    res["search"] = search_in_fresh_process()
    res["grep"] = [bench_grep(name) for name, _ in corpora if name in ("cutlass", "triton")]
    text = report_markdown(res)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
