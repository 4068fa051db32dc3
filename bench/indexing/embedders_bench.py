"""Embedders side by side, in one run on this machine: the static embedder's
one-time build, a cold index of the corpora with each embedder (wall seconds, stages, peak
memory from /usr/bin/time -v), a re-index after touching one file, fresh-process `search`
and `docs` beside `grep`, the quality of each embedder's index (hybrid and dense-only, per
query group, with the rule that picks the default), and the `make demo` steps with this
code (static default) and with the code before (``--baseline-ref``, MiniLM and chroma).

usage (the whole measurement, as bench/RESULTS.md reports it)::

  python bench/indexing/embedders_bench.py --all --cutlass MIRROR/cutlass --triton MIRROR/triton \\
      --ptx MIRROR/ptx91 --baseline-ref a9a4ca8 --write-results

or pieces: ``--embedders static,minilm``, ``--queries dev=bench/queries/eval-dev.jsonl,...``,
``--touch 5``, ``--fresh 7``, ``--demo``. Every index run is a `ctxkernel index` process on a
fresh store (and a fresh embedding cache); the static model is built first, into a fresh
embedders dir, and its build timed (``--no-build``: the model in ``--embedders-dir``); the
demo runs use that model (a fresh clone pays its build once more). ``--minilm-from INDEX``
gets MiniLM's quality from a copy of an earlier MiniLM index (vectors reused) when a cold
MiniLM index would take too long. Prints Markdown; ``--out`` writes
the JSON, ``--write-results`` appends the Markdown to bench/RESULTS.md.
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

sys.path.append(str(Path(__file__).resolve().parents[2]))  # bench.baseline
from bench import baseline

ROOT = Path(__file__).resolve().parents[2]
TIME = "/usr/bin/time"
RULE = 0.02  # static is the default when within this of MiniLM on R@10 and MRR@10
QUERY_SETS = "dev=bench/queries/eval-dev.jsonl,test=bench/queries/eval-test.jsonl"
DEMO_STEPS: list[tuple[str, list[str]]] = [
    ("index triton", ["index", "triton", "--source", "pkg:triton"]),
    ("index cutlass", ["index", "cutlass", "--source", "pkg:nvidia-cutlass-dsl"]),
    ("corpora", ["corpora", "--offline"]),
    ("search triton", ["search", "how do I time a kernel and get the median", "--corpus", "triton", "-k", "3"]),
    ("search cutlass", ["search", "partition a tensor across threads with a tiled copy", "--corpus", "cutlass", "-k", "3"]),
    ("search name", ["search", "make_tiled_copy", "-k", "3"]),
    ("grep", ["grep", "def do_bench", "--corpus", "triton", "-C", "2"]),
]  # fmt: skip


def ck() -> list[str]:
    """The CLI of the code on PYTHONPATH (``env_for`` sets it: this checkout or a baseline)."""
    return [sys.executable, "-m", "ctxkernel"]


def env_for(home: Path, embedders: Path, code: Path = ROOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXKERNEL_")}
    env.update(
        CTXKERNEL_HOME=str(home),
        CTXKERNEL_EMBEDDERS_DIR=str(embedders),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        ANONYMIZED_TELEMETRY="False",
        TRITON_DEFAULT_FP_FUSION="1",
    )
    return baseline.env_for(code, env)


def timed(
    cmd: list[str], env: dict[str, str], check: bool = True, code: Path = ROOT
) -> tuple[float, int, str]:
    """(wall s, peak RSS KB, stdout) of a Python command (``cmd[0]`` the interpreter) of
    ``code``'s tree under /usr/bin/time -v, run in that tree."""
    t = time.perf_counter()
    out = baseline.run(code, cmd[1:], env=env, check=False, wrap=[TIME, "-v"], python=cmd[0])
    wall = time.perf_counter() - t
    if check and out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr)
    return wall, int(m.group(1)) if m else 0, out.stdout


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build_embedder(embedders: Path) -> dict[str, Any]:
    shutil.rmtree(embedders, ignore_errors=True)
    env = env_for(Path(tempfile.mkdtemp()), embedders)
    log("building the static embedder")
    wall, rss, out = timed([*ck(), "embedder", "build", "--json"], env)
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
        log(f"cold index {name} --embed {embed}")
        load = os.getloadavg()[0]
        wall, rss, out = timed(
            [*ck(), "index", name, "--source", source, "--embed", embed, "--json"], env
        )
        report = json.loads(out.strip().splitlines()[-1])
        rows.append({"corpus": name, "embed": embed, "wall_s": round(wall, 1), "peak_mb": round(rss / 1024),
                     "files": report["files_total"], "chunks": report["chunks_total"],
                     "embedded": report["embedded"], "load": round(load, 1),
                     "stages_s": {k: round(v, 1) for k, v in report["seconds"].items()}})  # fmt: skip
    return rows


def migrated_index(
    home: Path, embedders: Path, embed: str, corpora: list[tuple[str, str]], source_index: Path
) -> list[dict[str, Any]]:
    """A copy of an index built earlier (with the same embedder) brought to this code's
    store: every chunk again, but the vectors from its embedding cache. Not a cold timing:
    a way to get ``embed``'s quality when a cold MiniLM index takes too long."""
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.copytree(
        source_index, home / "indexes", ignore=shutil.ignore_patterns("chroma", "locks")
    )
    records = home / "indexes" / "records.json"
    if records.is_file():
        records.unlink()  # its corpora are indexed again below
    env = env_for(home, embedders)
    rows = []
    for name, source in corpora:
        log(f"index {name} --embed {embed} from a copy of {source_index.name}")
        wall, rss, out = timed([*ck(), "index", name, "--source", source, "--embed", embed,
                                "--rebuild", "--json"], env)  # fmt: skip
        report = json.loads(out.strip().splitlines()[-1])
        rows.append({"corpus": name, "embed": f"{embed} (reused vectors)", "wall_s": round(wall, 1),
                     "peak_mb": round(rss / 1024), "files": report["files_total"],
                     "chunks": report["chunks_total"], "embedded": report["embedded"],
                     "load": round(os.getloadavg()[0], 1),
                     "stages_s": {k: round(v, 1) for k, v in report["seconds"].items()}})  # fmt: skip
    return rows


def touch_reindex(
    home: Path, embedders: Path, cutlass: str, n: int, rel: str = "include/cute/layout.hpp"
) -> dict[str, Any]:
    """Index cutlass from a local clone, then commit a one-line change to one file and
    re-index, ``n`` times (the store of the cold run, moved to the clone first)."""
    clone = home.parent / "cutlass-clone"
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--local", cutlass, str(clone)], check=True)
    env = env_for(home, embedders)
    git = ["git", "-C", str(clone), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]  # fmt: skip
    index = [*ck(), "index", "cutlass", "--source", str(clone), "--json"]
    log("touch: moving the cutlass index to a clone")
    subprocess.run(index, env=env, check=True, capture_output=True)
    time.sleep(2.5)  # files older than the stat cache's trust window
    subprocess.run(index, env=env, check=True, capture_output=True)
    noop_wall, _, _ = timed(index, env)
    walls, stages = [], []
    target = clone / rel
    for i in range(n):
        with target.open("a") as fh:
            fh.write(f"// touched by the benchmark {i}\n")
        subprocess.run([*git, "commit", "-qam", f"touch {i}"], check=True)
        wall, _, out = timed(index, env)
        report = json.loads(out.strip().splitlines()[-1])
        assert report["files_changed"] == 1, report
        walls.append(wall)
        stages.append(report["seconds"])
    last = {k: round(v, 2) for k, v in stages[-1].items()}
    return {"file": rel, "runs": n, "median_s": round(statistics.median(walls), 2),
            "min_s": round(min(walls), 2), "max_s": round(max(walls), 2), "noop_s": round(noop_wall, 2),
            "last_stages_s": last}  # fmt: skip


FRESH = {
    "search": ["search", "how to load a block of memory with a mask in triton", "-k", "5"],
    "search --json": ["search", "how to load a block of memory with a mask in triton", "-k", "5", "--json"],
    "docs": ["docs", "wgmma.mma_async"],
    "grep": ["grep", "make_tiled_copy", "--corpus", "cutlass"],
}  # fmt: skip


def fresh_process(home: Path, embedders: Path, n: int) -> dict[str, Any]:
    """Wall time of whole CLI processes (the console script's way in), interleaved so load
    hits them alike."""
    env = env_for(home, embedders)
    walls: dict[str, list[float]] = {k: [] for k in FRESH}
    log(f"fresh processes, {n} rounds")
    for _ in range(n):
        for label, args in FRESH.items():
            t = time.perf_counter()
            done = subprocess.run([*ck(), *args], env=env, capture_output=True)
            walls[label].append(time.perf_counter() - t)
            if done.returncode not in (0, 1):
                raise SystemExit(f"ctxkernel {' '.join(args)} failed: {done.stderr[-1000:]!r}")
    return {
        k: {"median_s": round(statistics.median(v), 2), "min_s": round(min(v), 2), "n": n}
        for k, v in walls.items()
    }


def quality(homes: dict[str, Path], embedders: Path, sets: str) -> list[dict[str, Any]]:
    """`ctxkernel eval` of the static index against the MiniLM one, in one run."""
    names = list(homes)
    first, second = names[0], names[1] if len(names) > 1 else None
    cmd = [*ck(), "eval", *sets.split(","), "--modes", "hybrid,dense", "--by", "corpus,kind",
           "--index-dir", str(homes[first] / "indexes"), "--json"]  # fmt: skip
    if second:
        cmd += ["--against-index-dir", str(homes[second] / "indexes")]
    log("quality: " + " vs ".join(names))
    out = subprocess.run(cmd, env=env_for(homes[first], embedders), cwd=ROOT,
                         capture_output=True, text=True)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"eval failed: {out.stderr[-2000:]}")
    label = {"base": first, "against": second}
    rows = []
    for line in out.stdout.splitlines():
        row = json.loads(line)
        if row.get("type") == "eval":
            row["embed"] = label.get(row["config"], row["config"])
            rows.append(row)
    return rows


def verdict(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Item 2's rule on hybrid, group all, per set: static within RULE of MiniLM on both."""
    out: dict[str, Any] = {}
    for s in dict.fromkeys(r["set"] for r in rows):
        got = {
            r["embed"]: r
            for r in rows
            if r["set"] == s and r["mode"] == "hybrid" and r["group"] == "all"
        }
        if "static" not in got or "minilm" not in got:
            continue
        d_r = got["static"]["recall@10"] - got["minilm"]["recall@10"]
        d_m = got["static"]["mrr@10"] - got["minilm"]["mrr@10"]
        out[s] = {"d_recall@10": round(d_r, 3), "d_mrr@10": round(d_m, 3),
                  "static_ok": d_r >= -RULE and d_m >= -RULE}  # fmt: skip
    return out


def baseline_code(base: Path, ref: str) -> Path:
    """The code at ``ref`` (read out of git, nothing checked out), to run beside this one."""
    return baseline.materialise(ref, base / f"code-{ref}")


def demo(base: Path, label: str, code: Path, embedders: Path) -> dict[str, Any]:
    """The `make demo` steps (setup aside: the venv is there) on a fresh home, each timed;
    the static model is the one built above (a fresh clone pays its build once more)."""
    home = base / f"demo-{label.split()[0]}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    env = env_for(home, embedders, code)
    steps: dict[str, float] = {}
    peak = 0
    for name, args in DEMO_STEPS:
        log(f"demo {label}: {name}")
        wall, rss, _ = timed([*ck(), *args], env, check=name.startswith("index"), code=code)
        steps[name] = round(wall, 1)
        peak = max(peak, rss)
    return {"label": label, "code": code.name if code != ROOT else "this checkout",
            "total_s": round(sum(steps.values()), 1), "steps_s": steps, "peak_mb": round(peak / 1024)}  # fmt: skip


def machine() -> str:
    load = os.getloadavg()
    return (
        f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average at the start {load[0]:.1f})"
    )


def markdown(res: dict[str, Any]) -> str:
    lines = [f"## {res['date']} — index CUTLASS in under a minute: static vs MiniLM", "",
             f"Machine: {res['machine']}; load average at the end {res.get('load_end', '?')}. "
             f"Command: `{res['command']}`", ""]  # fmt: skip
    if "build" in res:
        b = res["build"]
        lines += [f"Static embedder build (`ctxkernel embedder build`, fresh dir): {b['wall_s']} s, "
                  f"peak {b['peak_mb']} MB, {b['size_mb']} MB on disk, {b['vocabulary']} identifiers ({b['key']})", ""]  # fmt: skip
    lines += ["| embedder | corpus | files | chunks | embedded | wall s | peak MB | load | stages (s) |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in res["cold"]:
        stages = ", ".join(f"{k} {v}" for k, v in r["stages_s"].items())
        lines.append(f"| {r['embed']} | {r['corpus']} | {r['files']} | {r['chunks']} | {r['embedded']} | "
                     f"{r['wall_s']} | {r['peak_mb']} | {r.get('load', '')} | {stages} |")  # fmt: skip
    lines.append("")
    for embed in dict.fromkeys(r["embed"] for r in res["cold"]):
        small = [r for r in res["cold"] if r["embed"] == embed and r["corpus"] in ("triton", "ptx")]
        if len(small) == 2:
            lines.append(
                f"triton + ptx with {embed}: {round(sum(r['wall_s'] for r in small), 1)} s"
            )
    lines.append("")
    for t in res.get("touch") or []:
        lines += [f"Re-index after touching one file ({t['file']}, a commit each time), {t['runs']} runs: "
                  f"median {t['median_s']} s (min {t['min_s']}, max {t['max_s']}); no-op {t['noop_s']} s; "
                  f"last run's stages {t['last_stages_s']}", ""]  # fmt: skip
    if "fresh" in res:
        lines += [
            "| fresh process (three corpora, static) | median s | min s | n |",
            "|---|---|---|---|",
        ]
        for k, v in res["fresh"].items():
            lines.append(f"| `ctxkernel {k}` | {v['median_s']} | {v['min_s']} | {v['n']} |")
        lines.append("")
    if res.get("demo"):
        lines += [
            "| `make demo` steps | code | total s | peak MB | steps (s) |",
            "|---|---|---|---|---|",
        ]
        for d in res["demo"]:
            steps = ", ".join(f"{k} {v}" for k, v in d["steps_s"].items())
            lines.append(
                f"| {d['label']} | {d['code']} | {d['total_s']} | {d['peak_mb']} | {steps} |"
            )
        lines.append("")
    if res.get("quality"):
        lines += _quality_tables(res["quality"])
        for s, v in res.get("verdict", {}).items():
            lines.append(f"Rule on {s} (hybrid, all): static - MiniLM R@10 {v['d_recall@10']:+.3f}, "
                         f"MRR@10 {v['d_mrr@10']:+.3f}: {'within' if v['static_ok'] else 'NOT within'} {RULE}")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def _quality_tables(rows: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    embeds = list(dict.fromkeys(r["embed"] for r in rows))
    for s in dict.fromkeys(r["set"] for r in rows):
        head = "| group | n |" + "".join(
            f" {e} {m} R@10 | MRR |" for m in ("hybrid", "dense") for e in embeds
        )
        lines += [f"**{s}**", "", head, "|---|---|" + "---|---|" * 2 * len(embeds)]
        groups = list(dict.fromkeys(r["group"] for r in rows if r["set"] == s))
        for g in groups:
            cells, n = [], 0
            for m in ("hybrid", "dense"):
                for e in embeds:
                    r = next((x for x in rows if (x["set"], x["group"], x["mode"], x["embed"]) == (s, g, m, e)), None)  # fmt: skip
                    n = r["n"] if r else n
                    cells.append(
                        f" {r['recall@10']:.3f} | {r['mrr@10']:.3f} |" if r else " - | - |"
                    )
            lines.append(f"| {g} | {n} |" + "".join(cells))
        lines.append("")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--cutlass", required=True)
    ap.add_argument("--triton")
    ap.add_argument("--ptx")
    ap.add_argument("--all", action="store_true", help="everything below, both embedders")
    ap.add_argument("--embedders", default="static", help="comma-separated: static, minilm")
    ap.add_argument("--queries", default="", help="comma-separated [NAME=]judged query files")
    ap.add_argument("--touch", type=int, default=0, help="touch-one-file re-index runs")
    ap.add_argument(
        "--touch-file", action="append", default=None, metavar="PATH",
        help="the cutlass file to touch (repeatable; default include/cute/layout.hpp)",
    )  # fmt: skip
    ap.add_argument("--fresh", type=int, default=0, help="fresh-process runs of each command")
    ap.add_argument("--demo", action="store_true", help="the make demo steps, this code")
    ap.add_argument(
        "--baseline-ref", default="", help="also the demo steps with this commit's code"
    )
    ap.add_argument("--minilm-from", default=None, metavar="INDEX",
                    help="MiniLM's quality from a copy of this MiniLM index (vectors reused) "
                    "instead of a cold MiniLM index")  # fmt: skip
    ap.add_argument("--no-build", action="store_true", help="reuse --embedders-dir's built model")
    ap.add_argument("--embedders-dir", default=None)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--write-results", action="store_true", help="append to bench/RESULTS.md")
    args = ap.parse_args()
    if args.all:
        args.embedders, args.queries = "static,minilm", args.queries or QUERY_SETS
        args.touch, args.fresh, args.demo = args.touch or 5, args.fresh or 7, True
    base = Path(args.work or tempfile.mkdtemp(prefix="ck-embedders-bench-"))
    embedders = Path(args.embedders_dir) if args.embedders_dir else base / "embedders"
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "command": "python bench/indexing/embedders_bench.py "
        + " ".join(_shown_args(sys.argv[1:])),
        "cold": [],
    }
    t0 = time.perf_counter()
    if not args.no_build:
        res["build"] = build_embedder(embedders)
    corpora = [
        (n, s)
        for n, s in (("ptx", args.ptx), ("triton", args.triton), ("cutlass", args.cutlass))
        if s
    ]
    kinds = [e.strip() for e in args.embedders.split(",") if e.strip()]
    for embed in kinds:
        if embed == "minilm" and args.minilm_from:
            res["cold"] += migrated_index(
                base / f"home-{embed}", embedders, embed, corpora, Path(args.minilm_from)
            )
        else:
            res["cold"] += cold_index(base / f"home-{embed}", embedders, embed, corpora)
    first = base / f"home-{kinds[0]}"
    if args.fresh:
        res["fresh"] = fresh_process(first, embedders, args.fresh)
    if args.queries:
        res["quality"] = quality({e: base / f"home-{e}" for e in kinds}, embedders, args.queries)
        res["verdict"] = verdict(res["quality"])
    if args.touch:
        res["touch"] = [
            touch_reindex(first, embedders, args.cutlass, args.touch, rel)
            for rel in args.touch_file or ["include/cute/layout.hpp"]
        ]
    if args.demo or args.baseline_ref:
        res["demo"] = [demo(base, "after (static)", ROOT, embedders)] if args.demo else []
        if args.baseline_ref:
            code = baseline_code(base, args.baseline_ref)
            label = f"before ({args.baseline_ref}, MiniLM)"
            res["demo"].append(demo(base, label, code, embedders))
    res["load_end"] = round(os.getloadavg()[0], 1)
    res["total_s"] = round(time.perf_counter() - t0)
    text = markdown(res)
    print(text)
    log(f"done in {res['total_s']} s")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))
    if args.write_results:
        with (ROOT / "bench" / "RESULTS.md").open("a") as fh:
            fh.write("\n" + text + "\n")


def _shown_args(argv: list[str]) -> list[str]:
    """The arguments with this machine's paths put as MIRROR/... or left out."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in ("--work", "--out", "--embedders-dir"):
            skip = True
            continue
        if i and argv[i - 1] in ("--cutlass", "--triton", "--ptx"):
            a = "MIRROR/" + Path(a).name
        if i and argv[i - 1] == "--minilm-from":
            a = "MINILM_INDEX"
        out.append(a)
    return out


if __name__ == "__main__":
    main()
