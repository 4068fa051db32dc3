"""Embedders side by side, in one run on this machine: the static embedder's one-time build,
a cold index of the corpora with each embedder (wall seconds, stages, peak memory from
/usr/bin/time -v), a re-index after touching one file, fresh-process `search` and `docs`
beside `grep`, and the quality of each embedder's index (hybrid and dense-only, per query
group) on judged query files.

usage:
  python bench/embedders_bench.py --cutlass MIRROR/cutlass --triton MIRROR/triton --ptx MIRROR/ptx91 \\
      [--embedders static,minilm] [--queries bench/queries/dev.jsonl,...] [--touch 5] [--fresh 7]

Every index run is a `ctxkernel index` process on a fresh store (and a fresh embedding
cache); the static model is built first, into a fresh embedders dir, and its build timed.
Prints Markdown for bench/RESULTS.md; --out writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CK = [sys.executable, "-m", "ctxkernel"]
TIME = "/usr/bin/time"


def env_for(home: Path, embedders: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXKERNEL_")}
    env.update(
        CTXKERNEL_HOME=str(home),
        CTXKERNEL_EMBEDDERS_DIR=str(embedders),
        PYTHONPATH=str(ROOT),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        ANONYMIZED_TELEMETRY="False",
    )
    return env


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(wall s, peak RSS KB, stdout) of a command under /usr/bin/time -v."""
    t = time.perf_counter()
    out = subprocess.run([TIME, "-v", *cmd], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    return wall, int(m.group(1)) if m else 0, out.stdout


def build_embedder(embedders: Path) -> dict[str, Any]:
    shutil.rmtree(embedders, ignore_errors=True)
    env = env_for(Path(tempfile.mkdtemp()), embedders)
    print("[bench] building the static embedder", file=sys.stderr, flush=True)
    wall, rss, out = timed([*CK, "embedder", "build", "--json"], env)
    info = json.loads(out.strip().splitlines()[-1])
    return {"wall_s": round(wall, 1), "peak_mb": round(rss / 1024), "key": info["key"],
            "size_mb": round(info["size_bytes"] / 1e6, 1), "vocabulary": info["vocabulary_size"]}  # fmt: skip


def cold_index(
    home: Path, embedders: Path, embed: str, corpora: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = env_for(home, embedders)
    rows = []
    for name, source in corpora:
        print(f"[bench] cold index {name} --embed {embed}", file=sys.stderr, flush=True)
        wall, rss, out = timed(
            [*CK, "index", name, "--source", source, "--embed", embed, "--json"], env
        )
        report = json.loads(out.strip().splitlines()[-1])
        rows.append({"corpus": name, "embed": embed, "wall_s": round(wall, 1), "peak_mb": round(rss / 1024),
                     "files": report["files_total"], "chunks": report["chunks_total"],
                     "embedded": report["embedded"],
                     "stages_s": {k: round(v, 1) for k, v in report["seconds"].items()}})  # fmt: skip
    return rows


def touch_reindex(home: Path, embedders: Path, cutlass: str, n: int) -> dict[str, Any]:
    """Index cutlass from a local clone, then commit a one-line change to one file and
    re-index, ``n`` times (the store of the cold run, moved to the clone first)."""
    clone = home.parent / "cutlass-clone"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--local", cutlass, str(clone)], check=True)
    env = env_for(home, embedders)
    git = [
        "git",
        "-C",
        str(clone),
        "-c",
        "user.name=bench",
        "-c",
        "user.email=bench@example.invalid",
    ]
    subprocess.run(
        [*CK, "index", "cutlass", "--source", str(clone), "--json"],
        env=env,
        check=True,
        capture_output=True,
    )
    time.sleep(2.5)  # files older than the stat cache's trust window
    subprocess.run(
        [*CK, "index", "cutlass", "--source", str(clone), "--json"],
        env=env,
        check=True,
        capture_output=True,
    )
    noop_wall, _, _ = timed([*CK, "index", "cutlass", "--source", str(clone), "--json"], env)
    walls, stages = [], []
    target = clone / "include/cute/layout.hpp"
    for i in range(n):
        with target.open("a") as fh:
            fh.write(f"// touched by the benchmark {i}\n")
        subprocess.run([*git, "commit", "-qam", f"touch {i}"], check=True)
        wall, _, out = timed([*CK, "index", "cutlass", "--source", str(clone), "--json"], env)
        report = json.loads(out.strip().splitlines()[-1])
        assert report["files_changed"] == 1, report
        walls.append(wall)
        stages.append(report["seconds"])
    last = {k: round(v, 2) for k, v in stages[-1].items()}
    return {"file": "include/cute/layout.hpp", "runs": n, "median_s": round(statistics.median(walls), 2),
            "min_s": round(min(walls), 2), "max_s": round(max(walls), 2), "noop_s": round(noop_wall, 2),
            "last_stages_s": last}  # fmt: skip


FRESH = {
    "search": ["search", "how to load a block of memory with a mask in triton", "-k", "5"],
    "search --json": [
        "search",
        "how to load a block of memory with a mask in triton",
        "-k",
        "5",
        "--json",
    ],
    "docs": ["docs", "wgmma.mma_async"],
    "grep": ["grep", "make_tiled_copy", "--corpus", "cutlass"],
}


def fresh_process(home: Path, embedders: Path, n: int) -> dict[str, Any]:
    """Wall time of whole CLI processes, interleaved so load hits them alike."""
    env = env_for(home, embedders)
    walls: dict[str, list[float]] = {k: [] for k in FRESH}
    for _ in range(n):
        for label, args in FRESH.items():
            t = time.perf_counter()
            subprocess.run([*CK, *args], env=env, capture_output=True)
            walls[label].append(time.perf_counter() - t)
    return {
        k: {"median_s": round(statistics.median(v), 2), "min_s": round(min(v), 2), "n": n}
        for k, v in walls.items()
    }


def quality(home: Path, embedders: Path, files: list[str]) -> list[dict[str, Any]]:
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from ctxkernel import Workspace, evaluate\n"
        "ws = Workspace()\n"
        "for f in sys.argv[1:]:\n"
        "    qs = evaluate.load_queries(Path(f))\n"
        "    for row in evaluate.summarize(evaluate.run(ws, qs, ('hybrid', 'dense'))):\n"
        "        row['queries'] = Path(f).name\n"
        "        print(json.dumps(row))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *files], env=env_for(home, embedders),
                         capture_output=True, text=True, check=True)  # fmt: skip
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def machine() -> str:
    load = os.getloadavg()
    return (
        f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average at the start {load[0]:.1f})"
    )


def markdown(res: dict[str, Any]) -> str:
    lines = [f"### Embedders — {res['date']} — {res['machine']}", ""]
    if "build" in res:
        b = res["build"]
        lines += [f"Static embedder build (`ctxkernel embedder build`, fresh dir): {b['wall_s']} s, "
                  f"peak {b['peak_mb']} MB, {b['size_mb']} MB on disk, {b['vocabulary']} identifiers ({b['key']})", ""]  # fmt: skip
    lines += ["| embedder | corpus | files | chunks | embedded | wall s | peak MB | stages (s) |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in res["cold"]:
        stages = ", ".join(f"{k} {v}" for k, v in r["stages_s"].items())
        lines.append(f"| {r['embed']} | {r['corpus']} | {r['files']} | {r['chunks']} | {r['embedded']} | "
                     f"{r['wall_s']} | {r['peak_mb']} | {stages} |")  # fmt: skip
    lines.append("")
    if "touch" in res:
        t = res["touch"]
        lines += [f"Re-index after touching one file ({t['file']}, a commit each time), {t['runs']} runs: "
                  f"median {t['median_s']} s (min {t['min_s']}, max {t['max_s']}); no-op {t['noop_s']} s; "
                  f"last run's stages {t['last_stages_s']}", ""]  # fmt: skip
    if "fresh" in res:
        lines += ["| fresh process | median s | min s | n |", "|---|---|---|---|"]
        for k, v in res["fresh"].items():
            lines.append(f"| `ctxkernel {k}` | {v['median_s']} | {v['min_s']} | {v['n']} |")
        lines.append("")
    if res.get("quality"):
        lines += ["| queries | embedder | mode | group | n | recall@1 | recall@10 | mrr@10 | ndcg@10 |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for embed, rows in res["quality"].items():
            for r in rows:
                lines.append(f"| {r['queries']} | {embed} | {r['mode']} | {r['group']} | {r['n']} | "
                             f"{r['recall@1']} | {r['recall@10']} | {r['mrr@10']} | {r['ndcg@10']} |")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cutlass", required=True)
    ap.add_argument("--triton")
    ap.add_argument("--ptx")
    ap.add_argument("--embedders", default="static", help="comma-separated: static, minilm")
    ap.add_argument("--queries", default="", help="comma-separated judged query files")
    ap.add_argument("--touch", type=int, default=5, help="touch-one-file re-index runs (0: none)")
    ap.add_argument(
        "--fresh", type=int, default=7, help="fresh-process runs of each command (0: none)"
    )
    ap.add_argument("--no-build", action="store_true", help="reuse --embedders-dir's built model")
    ap.add_argument("--embedders-dir", default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    base = Path(args.work or tempfile.mkdtemp(prefix="ck-embedders-bench-"))
    embedders = Path(args.embedders_dir) if args.embedders_dir else base / "embedders"
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "cold": [],
    }
    if not args.no_build:
        res["build"] = build_embedder(embedders)
    corpora = [
        (n, s)
        for n, s in (("ptx", args.ptx), ("triton", args.triton), ("cutlass", args.cutlass))
        if s
    ]
    kinds = [e.strip() for e in args.embedders.split(",") if e.strip()]
    for embed in kinds:
        res["cold"] += cold_index(base / f"home-{embed}", embedders, embed, corpora)
    first = base / f"home-{kinds[0]}"
    if args.fresh:
        res["fresh"] = fresh_process(first, embedders, args.fresh)
    files = [q for q in args.queries.split(",") if q]
    if files:
        res["quality"] = {e: quality(base / f"home-{e}", embedders, files) for e in kinds}
    if args.touch:
        res["touch"] = touch_reindex(first, embedders, args.cutlass, args.touch)
    text = markdown(res)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
