"""The static embedder's one-time build, before and after in one run on this
machine: `ctxkernel embedder build --json` of the code at ``--baseline-ref`` and of this
checkout, each in a fresh embedders dir under /usr/bin/time -v (wall, CPU seconds, peak
memory, load average before and after), then what the two models are: rows, tokens the
transformer saw, and how alike the identifier rows are as model2vec left them (mean
cosine between two identifiers and between two base tokens, model2vec's own rows).

usage::

  python bench/indexing/embedder_build.py --baseline-ref 0747f53 [--recipe default] [--work DIR] [--out FILE.json]

Prints Markdown (for bench/RESULTS.md). The two builds run one after the other, never
side by side; on a shared machine compare the CPU seconds as well as the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parents[2]))  # bench.baseline
from embedders_bench import ROOT, TIME, baseline_code, env_for, log, machine

from bench import baseline


def build(code: Path, embedders: Path, preset: str) -> dict[str, Any]:
    """One `embedder build` of ``code`` into the fresh dir ``embedders``, under time -v."""
    shutil.rmtree(embedders, ignore_errors=True)
    env = env_for(Path(tempfile.mkdtemp()), embedders, code)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    # in ``code``'s tree: `python -m` puts the working dir before PYTHONPATH
    args = ["-m", "ctxkernel", "embedder", "build", "--json", "--recipe", preset]
    out = baseline.run(code, args, env=env, check=False, wrap=[TIME, "-v"])
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"build of {code} failed ({out.returncode}): {out.stderr[-2000:]}")

    def field(name: str) -> float:
        m = re.search(rf"{re.escape(name)}: ([\d.]+)", out.stderr)
        return float(m.group(1)) if m else float("nan")

    info = json.loads(out.stdout.strip().splitlines()[-1])
    folder = Path(info["dir"])
    recipe = json.loads((folder / "recipe.json").read_text())
    return {
        "code": "this checkout" if code == ROOT else code.name,
        "key": info["key"],
        "wall_s": round(wall, 1),
        "cpu_s": round(field("User time (seconds)") + field("System time (seconds)"), 1),
        "peak_mb": round(field("Maximum resident set size (kbytes)") / 1024),
        "load_start": round(load0, 1),
        "load_end": round(os.getloadavg()[0], 1),
        "dir": str(folder),
        "size_mb": round(info["size_bytes"] / 1e6, 1),
        "rows": recipe.get("rows"),
        "tokens_embedded": recipe.get("tokens_embedded"),
        "stages_s": recipe.get("stages_s"),
        **likeness(folder),
    }


def likeness(folder: Path) -> dict[str, float]:
    """Mean cosine between two identifier rows and between two base-token rows, of
    model2vec's rows (before our identifier rows): how far one shared direction pulls them."""
    import numpy as np
    from safetensors.numpy import load_file

    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    added = [a["id"] for a in tokenizer.get("added_tokens", []) if not a["special"]]
    rows = next(iter(load_file(str(folder / "model.safetensors")).values())).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True) + 1e-9
    rng = np.random.default_rng(0)
    base = np.setdiff1d(np.arange(len(rows)), added)

    def mean_cos(ids: Any) -> float:
        pick = rng.choice(ids, size=min(len(ids), 2000), replace=False)
        cos = rows[pick] @ rows[pick].T
        return float(cos[np.triu_indices(len(pick), 1)].mean())

    return {
        "identifier_cos": round(mean_cos(np.asarray(added)), 3) if added else float("nan"),
        "base_cos": round(mean_cos(base), 3),
    }


def identity(before: Path, after: Path) -> dict[str, float]:
    """How far two builds' rows (``vectors.npy``) are apart: max abs element difference
    and the largest per-row ||a - b|| / ||a|| (float16's epsilon is 4.9e-4)."""
    import numpy as np

    a = np.load(before / "vectors.npy").astype(np.float32)
    b = np.load(after / "vectors.npy").astype(np.float32)
    if a.shape != b.shape:
        return {"max_abs": float("nan"), "max_row_rel": float("nan")}
    rel = np.linalg.norm(a - b, axis=1) / np.maximum(np.linalg.norm(a, axis=1), 1e-9)
    return {"max_abs": float(np.abs(a - b).max()), "max_row_rel": float(rel.max())}


def markdown(res: dict[str, Any]) -> str:
    lines = [
        f"## {res['date']} — the static embedder's build, before and after",
        "",
        f"Machine: {res['machine']}. Command: `{res['command']}`",
        "",
        "| code | key | wall s | CPU s | peak MB | load start/end | tokens through MiniLM "
        "| rows | identifier cos | base cos | stages (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in res["builds"]:
        lines.append(
            f"| {b['code']} | `{b['key']}` | {b['wall_s']} | {b['cpu_s']} | {b['peak_mb']} | "
            f"{b['load_start']}/{b['load_end']} | {b['tokens_embedded'] or '?'} | {b['rows']} | "
            f"{b['identifier_cos']} | {b['base_cos']} | {b['stages_s'] or '-'} |"
        )
    if "identity" in res:
        i = res["identity"]
        lines += ["", f"Same key before and after: rows max abs diff {i['max_abs']:.3g}, "
                  f"largest per-row relative diff {i['max_row_rel']:.2g} (float16 epsilon 4.9e-4)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--baseline-ref", required=True, help="git ref of the code before")
    ap.add_argument("--recipe", default="default", help="default, fast (after only), tiny")
    ap.add_argument("--work", default=None, help="scratch dir (default: a temp dir)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="embedder-build-"))
    res: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "command": f"python bench/indexing/embedder_build.py --baseline-ref {args.baseline_ref} "
        f"--recipe {args.recipe}",
        "builds": [],
    }
    for label, code in (("before", baseline_code(work, args.baseline_ref)), ("after", ROOT)):
        log(f"building with the code {label}")
        res["builds"].append(build(code, work / f"embedders-{label}", args.recipe))
    before, after = res["builds"]
    if before["key"] == after["key"]:
        res["identity"] = identity(Path(before["dir"]), Path(after["dir"]))
    print(markdown(res))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
