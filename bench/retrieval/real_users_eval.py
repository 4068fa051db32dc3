"""The real-users evaluation in one command: Recall@10 / MRR@10 per set, group and mode,
each shipped ranking change switched off in turn (so its part is measured on the same
index in the same run), and context efficiency beside them.

usage::

    python bench/retrieval/real_users_eval.py --index-dir INDEX [--test] [--markdown]

Runs ``ctxkernel eval`` on the dev halves (``real-users-dev.jsonl`` as ``rdev``,
``eval-dev.jsonl`` as ``edev``; with ``--test`` also ``rtest`` and ``etest``, aggregates
only: never read their misses while tuning) with modes hybrid, lexical and dense, groups
corpus and kind, ``--context``, and configurations:

- ``base``: this tree's search;
- ``no-own-words``: a pasted error searched by its message alone (``OWN_WORDS_MIN:0``);
- ``no-bare``: a bare pasted message not read for raise sites (``BARE_MIN_SHARE:1.0``);
- ``first-chunk``: path hits stand in by the file's first chunk (``PATH_BEST_CHUNK:false``);
- ``no-sentences``: a long question is not also searched sentence by sentence
  (``SENTENCE_WEIGHT:0``).

The index is built with ``ctxkernel index NAME --source MIRROR --index-dir INDEX`` over
local mirrors at the commits the query files' headers name (``materialize_snapshot.py``).
All offline; on the 2-core development machine the four sets take about a minute per
configuration, the context readers about a minute more.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
QUERIES = ROOT / "bench" / "queries"
CONFIGS = {
    "no-own-words": "OWN_WORDS_MIN:0",
    "no-bare": "BARE_MIN_SHARE:1.0",
    "first-chunk": "PATH_BEST_CHUNK:false",
    "no-sentences": "SENTENCE_WEIGHT:0",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--test", action="store_true", help="also the test halves (aggregates)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    sets = [f"rdev={QUERIES / 'real-users-dev.jsonl'}", f"edev={QUERIES / 'eval-dev.jsonl'}"]
    if args.test:
        sets += [
            f"rtest={QUERIES / 'real-users-test.jsonl'}",
            f"etest={QUERIES / 'eval-test.jsonl'}",
        ]
    cmd = [sys.executable, "-m", "ctxkernel", "eval", *sets, "--index-dir", args.index_dir]
    cmd += ["--modes", "hybrid,lexical,dense", "--by", "corpus,kind", "--context", "--json"]
    for name, settings in CONFIGS.items():
        cmd += ["--config", f"{name}={settings}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    if not args.markdown:
        for row in rows:
            print(json.dumps(row))
        return 0
    print(_table(rows))
    return 0


def _table(rows: list[dict[str, Any]]) -> str:
    evals = [r for r in rows if r["type"] == "eval"]
    configs = list(dict.fromkeys(r["config"] for r in evals))
    cols = [("base", "hybrid"), ("base", "lexical"), ("base", "dense")]
    cols += [(c, "hybrid") for c in configs if c != "base"]
    context = {(r["set"], r["group"], r["reader"]): r for r in rows if r["type"] == "context"}
    head = ["set", "group", "n"] + [f"{c} {m}" if c != "base" else m for c, m in cols]
    head += ["search ctx@2k / 8k", "grep-agent ctx@2k / 8k"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keyed = {(r["set"], r["group"], r["config"], r["mode"]): r for r in evals}
    for s, g in dict.fromkeys((r["set"], r["group"]) for r in evals):
        n = keyed[(s, g, "base", "hybrid")]["n"]
        cells = [s, g, str(n)]
        for c, m in cols:
            r = keyed.get((s, g, c, m))
            cells.append(f"{r['recall@10']:.3f} / {r['mrr@10']:.3f}" if r else "")
        for reader in ("search", "grep-agent"):
            r = context.get((s, g, reader))
            cells.append(f"{r['ctx@2000']:.3f} / {r['ctx@8000']:.3f}" if r else "")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
