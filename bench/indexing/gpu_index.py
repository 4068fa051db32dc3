"""Cold cutlass index with a transformer embedder on the GPU (see bench/indexing/gpu_index.sh):
each run on a fresh store and a fresh embedding cache, so every text is embedded.

usage:
  python bench/indexing/gpu_index.py --source dir:CUTLASS_FILES --model MODEL_DIR [--runs 2] [--out FILE]

Works on a CPU too (slowly): it embeds wherever ``CTXKERNEL_EMBED_DEVICE`` or torch says.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def device_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    else:
        info["gpu"] = "none"
    return info


def one_run(source: str, model: str, home: Path) -> dict[str, Any]:
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    os.environ["CTXKERNEL_HOME"] = str(home)
    from ctxkernel import Workspace

    ws = Workspace(embed=model)
    t = time.perf_counter()
    report = ws.index("cutlass", source=source)
    wall = time.perf_counter() - t
    embed_s = report.seconds.get("embed", 0.0)
    return {
        "wall_s": round(wall, 1),
        "files": report.files_total,
        "chunks": report.chunks_total,
        "embedded": report.embedded,
        "embedded_per_s": round(report.embedded / embed_s, 1) if embed_s else None,
        "device": getattr(ws.embedder, "device", "?"),
        "key": ws.embedder.key,
        "stages_s": {k: round(v, 1) for k, v in report.seconds.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--source", required=True, help="dir:PATH with the cutlass files")
    ap.add_argument("--model", required=True, help="a sentence-transformers model directory")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--manifest", default=None, help="the carry folder's MANIFEST, copied into the result"
    )
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="ck-gpu-index-"))
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()})",
        **device_info(),
        "runs": [],
    }
    if args.manifest and Path(args.manifest).is_file():
        result["carry"] = Path(args.manifest).read_text()
    for i in range(args.runs):
        run = one_run(args.source, args.model, work / f"home-{i}")
        print(json.dumps(run), flush=True)
        result["runs"].append(run)
    print(
        f"| {result['gpu']} | {result['runs'][-1]['files']} files, {result['runs'][-1]['chunks']} chunks, "
        f"{result['runs'][-1]['embedded']} embedded | "
        + " / ".join(f"{r['wall_s']} s" for r in result["runs"])
        + " | "
        + ", ".join(f"{k} {v}" for k, v in result["runs"][-1]["stages_s"].items())
        + " |"
    )
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
