"""The concept-link table's update on a real corpus (re-index after touching one
file): edit files of a CUTLASS clone one at a time, re-index it with `ctxkernel index`, and
check that the table the run left (the changed files' links applied in place, or the table
built again) holds exactly what a full build of the same cache finds.

usage::

  python bench/indexing/links_incremental.py --cutlass MIRROR/cutlass --embedders-dir DIR \\
      [--files 24] [--seed 1] [--out result.json]

The files are drawn (seeded) from those the links are made from (an instruction of their
own, a call of a linked name, a definition of one) and from the rest; the edits cycle
through a comment added at the end, a line added at the top (every chunk of the file moves),
the second half of the file cut, and the file removed. Each step prints the run's wall
seconds, its link stage, what it did to the table ("kept", "updated", "built") and whether
the table matched. Prints Markdown; exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from embedders_bench import ROOT, _shown_args, ck, env_for, log, machine

sys.path.insert(0, str(ROOT))
from ctxkernel.links.table import LINKS_FILE, build, rows
from ctxkernel.store import Store

EDITS = ("append", "prepend", "cut", "remove")


def canonical(db_path: Path) -> tuple[Any, ...]:
    """Each chunk's links in their order; names, calls and info as sorted lists."""
    db = sqlite3.connect(db_path)
    try:
        return rows(db)
    finally:
        db.close()


def edit(clone: Path, rel: str, how: str) -> None:
    target = clone / rel
    if how == "remove":
        target.unlink()
        return
    text = target.read_text(encoding="utf-8", errors="surrogateescape")
    comment = "# " if rel.endswith(".py") else "// "
    if how == "append":
        text += f"{comment}edited by the benchmark\n"
    elif how == "prepend":
        text = f"{comment}edited by the benchmark\n" + text
    else:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[: max(1, len(lines) // 2)])
    target.write_text(text, encoding="utf-8", errors="surrogateescape")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cutlass", required=True, help="a local NVIDIA/cutlass clone to copy")
    ap.add_argument("--embedders-dir", required=True, help="where the static model is built")
    ap.add_argument("--files", type=int, default=24, help="files edited, one per step")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="write the JSON here")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ck-links-"))
    clone, home = base / "cutlass", base / "home"
    subprocess.run(["git", "clone", "-q", "--local", args.cutlass, str(clone)], check=True)
    env = env_for(home, Path(args.embedders_dir))
    git = ["git", "-C", str(clone), "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]  # fmt: skip
    index = [*ck(), "index", "cutlass", "--source", str(clone), "--json"]
    log("cold index of the clone")
    subprocess.run(index, env=env, check=True, capture_output=True, cwd=ROOT)
    time.sleep(2.5)  # files older than the stat cache's trust window
    store = Store(home / "indexes")
    cache = store.cache("cutlass")
    artifact = cache.directory / LINKS_FILE
    db = sqlite3.connect(artifact)
    involved = sorted(
        {p for t in ("links", "names", "calls") for (p,) in db.execute(f"SELECT path FROM {t}")}
    )
    db.close()
    others = sorted(set(cache.files()) - set(involved))
    rng = random.Random(args.seed)
    n_inv = (args.files * 3 + 3) // 4
    chosen = rng.sample(involved, n_inv) + rng.sample(others, args.files - n_inv)
    rng.shuffle(chosen)
    steps: list[dict[str, Any]] = []
    for i, rel in enumerate(chosen):
        how = EDITS[i % len(EDITS)]
        edit(clone, rel, how)
        subprocess.run([*git, "commit", "-qam", f"{how} {rel}"], check=True)
        t = time.perf_counter()
        out = subprocess.run(index, env=env, check=True, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - t
        report = json.loads(out.stdout.strip().splitlines()[-1])
        applied = canonical(artifact)
        store = Store(home / "indexes")
        build(store.synced_cache("cutlass"))
        same = canonical(artifact) == applied
        steps.append({
            "file": rel, "edit": how, "involved": rel in involved, "wall_s": round(wall, 2),
            "links_s": round(report["seconds"].get("links", 0.0), 2), "links": report["links"],
            "files_changed": report["files_changed"] + report["files_removed"], "same": same,
        })  # fmt: skip
        log(f"{i + 1}/{len(chosen)} {how} {rel}: {wall:.2f} s, {report['links']}, same={same}")
    shutil.rmtree(base, ignore_errors=True)
    res = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "command": "python bench/indexing/links_incremental.py "
        + " ".join(_shown_args(sys.argv[1:])),
        "steps": steps,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    print(render(res))
    return 0 if all(s["same"] for s in steps) else 1


def render(res: dict[str, Any]) -> str:
    steps = res["steps"]
    lines = [
        f"Link table after one edited file, {len(steps)} edits of a CUTLASS clone "
        f"({res['date']}, {res['machine']}; `{res['command']}`):",
        "",
        "| what the run did to the table | edits | involved | wall s (median, max) | "
        "link stage s (median, max) | same as a full build |",
        "|---|---|---|---|---|---|",
    ]
    for kind in ("kept", "updated", "built"):
        rows = [s for s in steps if s["links"] == kind]
        if not rows:
            continue
        walls, stage = [s["wall_s"] for s in rows], [s["links_s"] for s in rows]
        lines.append(
            f"| {kind} | {len(rows)} | {sum(s['involved'] for s in rows)} | "
            f"{statistics.median(walls):.2f}, {max(walls):.2f} | "
            f"{statistics.median(stage):.2f}, {max(stage):.2f} | "
            f"{sum(s['same'] for s in rows)} of {len(rows)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
