"""Verdict identity: this tree's verdicts are those of a baseline tree, candidate for candidate.

A change that only moves code (rooms, packages, a merged library) must not move a single
verdict. Every example solution and bad candidate under ``examples/`` and every planted
cheat under ``tests/harness/cheats/`` is checked by each tree (this checkout and
``--baseline``, each imported from its own root in its own process, each with its own
copy of the problem and candidate, the tests' fast CPU options and one secret seed, so
both see the same unseen shapes and trial inputs), and the verdicts
are compared: whether it passed, which rung failed, and every rung's status in order.
Reason texts are compared too but reported apart, since a message may be improved on
purpose; the items present in only one tree are listed.

    python bench/harness/verdict_identity.py --baseline 44cd86f [--this REV] [--only c15_]

``--baseline`` (and ``--this``, default this checkout) is a git revision or a folder holding
a tree (``bench/baseline.py``). About 7 minutes for 84 items on 2 cores. Exit 0 when every verdict is
identical, 1 when any differs, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT))  # appended: the tree under test comes first

from bench import baseline  # noqa: E402

# a verdict needs the planted cheats and the tests' fast options besides the code
PATHS = (*baseline.TREE_PATHS, "tests")


def tree_of(spec: str) -> Path:
    """A folder as it is, else a revision materialised with its tests."""
    if Path(spec).is_dir():
        return Path(spec).resolve()
    commit = baseline.commit_of(spec)  # a folder of its own: a plain baseline lacks tests/
    dest = Path(tempfile.gettempdir()) / f"ck-verdicts-{commit[:12]}"
    return baseline.materialise(spec, dest, paths=PATHS)


def items_of(tree: Path) -> list[str]:
    """Candidate files relative to the tree: examples' solutions and bad ones, cheats."""
    out = [
        str(p.relative_to(tree))
        for p in sorted((tree / "examples").glob("*/solution_*.py"))
        + sorted((tree / "examples").glob("*/bad/*.py"))
        + sorted((tree / "tests/harness/cheats").glob("c*.py"))
    ]
    return out


WORKER = r"""
import json, sys, traceback
from pathlib import Path
tree = Path(sys.argv[1]).resolve()
sys.path[:0] = [str(tree), str(tree / "tests" / "harness")]
from cheatspec import read_expectation, problem_path
from conftest import fast_options
from harness.runner import LocalRunner, check

rel = sys.argv[2]
path = tree / rel
if rel.startswith("examples/"):
    problem = path.parent.parent.name if path.parent.name == "bad" else path.parent.name
    opts = {}
else:
    expect = read_expectation(path)
    problem, opts = expect.problem, dict(expect.options)
try:
    options = fast_options(problem, **opts, secret=int(sys.argv[3]))
    verdict = check(problem_path(problem), path, options, runner=LocalRunner())
    doc = verdict.to_json()
    out = {
        "ok": doc["ok"],
        "failed_rung": doc["failed_rung"],
        "rungs": [[r["name"], r["status"]] for r in doc["rungs"]],
        "reason": doc["reason"],
    }
except Exception as exc:  # a usage error is a verdict of its own here
    out = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
print("VERDICT " + json.dumps(out))
"""


def verdict_in(tree: Path, rel: str, home: Path, secret: int) -> dict[str, Any]:
    env = dict(os.environ)
    env.update(
        CTXKERNEL_HOME=str(home),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        FAKE_SECRET_API_KEY="must-not-reach-the-worker",
    )
    env.pop("PYTHONPATH", None)
    proc = baseline.run(
        tree, ["-c", WORKER, str(tree), rel, str(secret)], env=env, check=False, timeout=900
    )
    for line in proc.stdout.splitlines():
        if line.startswith("VERDICT "):
            return json.loads(line[len("VERDICT ") :])  # type: ignore[no-any-return]
    tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"error": f"driver exited {proc.returncode}: {tail}"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", required=True, help="git revision or a folder holding a tree")
    p.add_argument("--this", help="a revision or folder to compare instead of this checkout")
    p.add_argument("--only", default="", help="only items whose path contains this")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument(
        "--secret", type=int, default=20261205,
        help="the secret seed both trees check with (unseen shapes, trial seeds): the same inputs",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON line per item")
    args = p.parse_args()
    try:
        base = tree_of(args.baseline)
        this = tree_of(args.this) if args.this else ROOT
    except (OSError, baseline.BaselineError, subprocess.CalledProcessError) as exc:
        print(f"verdict_identity: {exc}", file=sys.stderr)
        sys.exit(2)
    mine, theirs = set(items_of(this)), set(items_of(base))
    both = sorted(i for i in mine & theirs if args.only in i)
    jobs = [(tree, rel) for rel in both for tree in (base, this)]
    with tempfile.TemporaryDirectory(prefix="verdict-identity-") as tmp:
        homes = {base: Path(tmp, "base"), this: Path(tmp, "this")}
        for h in homes.values():
            h.mkdir()
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            done = list(pool.map(lambda j: verdict_in(j[0], j[1], homes[j[0]], args.secret), jobs))
    results = {(str(t), r): v for (t, r), v in zip(jobs, done, strict=True)}
    same = differ = reworded = 0
    for rel in both:
        a, b = results[(str(base), rel)], results[(str(this), rel)]
        key = ("ok", "failed_rung", "rungs", "error")
        identical = all(a.get(k) == b.get(k) for k in key)
        same += identical
        differ += not identical
        words = identical and a.get("reason") != b.get("reason")
        reworded += words
        if args.json:
            print(
                json.dumps(
                    {
                        "type": "item",
                        "item": rel,
                        "identical": identical,
                        "reason_reworded": words,
                        "baseline": a,
                        "this": b,
                    }
                )
            )
        elif not identical or words:
            tag = "DIFFERS " if not identical else "reworded"
            print(f"{tag} {rel}")
            print(
                f"    baseline: {a.get('failed_rung') or a.get('error') or 'passed'}"
                f" -- {a.get('reason', '')[:160]}"
            )
            print(
                f"    this:     {b.get('failed_rung') or b.get('error') or 'passed'}"
                f" -- {b.get('reason', '')[:160]}"
            )
    only = sorted(mine ^ theirs)
    summary = {
        "type": "summary",
        "items": len(both),
        "identical": same,
        "differ": differ,
        "reason_reworded": reworded,
        "only_in_one_tree": only,
    }
    print(
        json.dumps(summary)
        if args.json
        else f"{same}/{len(both)} verdicts identical, {differ} differ, {reworded} reasons reworded;"
        f" only in one tree: {', '.join(only) or 'none'}"
    )
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
