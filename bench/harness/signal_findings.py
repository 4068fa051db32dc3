"""Which trivial answers pass which upstream problems' checks, before and after the signal check.

For each problem of local mirrors of KernelBench and gpu-mode/reference-kernels (a
checkout or a bare git directory; nothing is downloaded), on each shape a check uses
(``--shapes default``: the shapes fitted to the device; ``upstream``: KernelBench's own
sizes, GPU MODE's ``tests``), the trivial answers of ``harness/signalcheck.py`` -- zeros,
ones, an input of the output's shape, the output's mean everywhere, the reference output
of another input -- go through the problem's own check:

- **before**: the trivial answers that pass the problem's tolerance (what a kernel
  returning them would have got);
- **after**: what the harness does now: ``relative`` where the shape is judged relative
  to the output's scale (those answers then fail), ``REFUSED`` where an answer passes even
  that on every shape (the problem is refused at load, with that reason).

Prints a markdown table of the problems where anything passes (``--all``: every problem)
and a summary line; ``--json OUT`` keeps every row::

    python bench/harness/signal_findings.py --kernelbench MIRROR/KernelBench \\
        --reference-kernels MIRROR/reference-kernels --levels level1 --device cpu

A problem whose reference cannot run here (CUDA-only inputs on a CPU, too big) is listed
as skipped with the reason. On a CPU with the default shapes all of KernelBench level 1
takes a few minutes; ``--match REGEX`` and ``--limit N`` take a subset.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _git(mirror: Path) -> list[str]:
    """How to run git on a mirror: a bare git directory or a checkout."""
    if (mirror / "HEAD").is_file() and (mirror / "objects").is_dir():
        return ["git", "--git-dir", str(mirror)]
    return ["git", "-C", str(mirror)]


def extract(mirror: Path, subdirs: list[str], into: Path) -> Path:
    """The mirror's ``subdirs`` at HEAD, unchanged, under ``into`` (a plain folder that
    holds them already, such as a copy carried to a GPU machine, is used as it is)."""
    import tarfile

    if all((mirror / d).is_dir() for d in subdirs) and not (mirror / ".git").exists():
        return mirror
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "mirror.tar"
    done = subprocess.run(
        [*_git(mirror), "archive", "-o", str(archive), "HEAD", *subdirs],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"error: {mirror}: git archive failed: {done.stderr.strip()[:200]}")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into


def shapes_of(problem: Any, device: str, which: str, given: dict[str, int]) -> list[dict[str, Any]]:
    if which == "upstream":
        shapes = [dict(s) for s in (problem.shapes if problem.format != "kernelbench" else [{}])]
    else:
        shapes = problem.shapes_for(device)
    if given and problem.format == "kernelbench":  # --set: fewer rows, the same row length
        shapes = [dict(s, **given) for s in shapes]
    return shapes


def study(
    path: Path, device: str, which: str, given: dict[str, int] | None = None
) -> dict[str, Any]:
    """One problem's findings, by the harness's own signal check (``Inputs.check_signal``):
    per shape, the trivial answers that pass before and after, and whether it is refused."""
    import torch

    from harness.errors import ProblemError
    from harness.options import RunOptions
    from harness.problems.problem import load_problem
    from harness.rungs.inputs import Inputs, shape_label

    started = time.monotonic()
    row: dict[str, Any] = {"problem": str(path), "shapes": []}
    try:
        problem = load_problem(path)
        shapes = shapes_of(problem, device, which, given or {})
        if given and problem.format == "kernelbench":
            try:
                problem.init(shapes[0]) if problem.init else None
            except Exception:  # a --set key this problem does not have: its own shapes
                shapes = shapes_of(problem, device, which, {})
        inputs = Inputs(problem, RunOptions(device=device, shapes=shapes, secret=0), device)
        try:
            inputs.study()
        except ProblemError as exc:
            if "cannot tell" not in str(exc):
                raise
            row["refused"] = str(exc)
        for index, shape in enumerate(shapes):
            findings = inputs.signal.get(index, [])
            row["shapes"].append(
                {
                    "shape": shape_label(shape),
                    "peak": max((f.peak for f in findings), default=None),
                    "before": sorted({a for f in findings for a in f.passed}),
                    "still": sorted({a for f in findings for a in f.still}),
                    "noise": any(f.noise for f in findings),
                }
            )
        if device == "cuda":
            torch.cuda.empty_cache()
    except Exception as exc:  # a problem that cannot run here: listed with why
        row["skipped"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    row["seconds"] = round(time.monotonic() - started, 2)
    return row


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return [value] if isinstance(value, torch.Tensor) else []


def table(rows: list[dict[str, Any]], everything: bool) -> str:
    lines = [
        "| problem | shape | max abs output (where one passes) | pass the problem's check "
        "(before) | after |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        name = row["name"]
        if "skipped" in row:
            if everything:
                lines.append(f"| {name} | - | - | skipped: {row['skipped']} | - |")
            continue
        for shape in row["shapes"]:
            if not shape["before"] and not everything:
                continue
            still = ", ".join(shape["still"])
            if shape["noise"]:
                after = f"not tightened: the output is rounding noise ({still} pass)"
            elif shape["still"]:
                after = f"{still} pass even judged relative to the output's scale"
            elif shape["before"]:
                after = "judged relative to the output's scale: all fail"
            else:
                after = "-"
            if row.get("refused") and shape["still"]:
                after = f"REFUSED: {after}"
            before = ", ".join(shape["before"]) or "none"
            peak = "-" if shape["peak"] is None else f"{shape['peak']:.3g}"
            lines.append(
                f"| {name} | {shape['shape'] or 'upstream'} | {peak} | {before} | {after} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench mirror")
    parser.add_argument("--reference-kernels", type=Path, help="a reference-kernels mirror")
    parser.add_argument("--levels", default="level1", help="KernelBench levels (comma-separated)")
    parser.add_argument(
        "--gpumode-dirs",
        default="problems/pmpp_v2",
        help="reference-kernels folders of problems (comma-separated)",
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--shapes", default="default", choices=("default", "upstream"))
    parser.add_argument(
        "--set",
        default="",
        metavar="KEY=N,...",
        help="KernelBench sizes to override where a problem has them (batch_size=256: "
        "fewer rows of the same length, so upstream row sizes fit)",
    )
    parser.add_argument("--match", default="", help="only problems whose path matches")
    parser.add_argument("--limit", type=int, default=0, help="at most this many problems")
    parser.add_argument("--all", action="store_true", help="list problems where nothing passes")
    parser.add_argument("--json", type=Path, help="write every row here")
    args = parser.parse_args(argv)
    if not args.kernelbench and not args.reference_kernels:
        parser.error("give --kernelbench and/or --reference-kernels")

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        files: list[Path] = []
        if args.kernelbench:
            levels = [f"KernelBench/{level}" for level in args.levels.split(",") if level]
            root = extract(args.kernelbench.resolve(), levels, Path(tmp) / "kb")
            for level in levels:
                files += sorted((root / level).glob("*.py"), key=_number)
        if args.reference_kernels:
            dirs = [d for d in args.gpumode_dirs.split(",") if d]
            parents = sorted({str(Path(d).parent) for d in dirs} | set(dirs))
            root = extract(args.reference_kernels.resolve(), parents, Path(tmp) / "rk")
            for folder in dirs:
                files += sorted(
                    p for p in (root / folder).iterdir() if (p / "reference.py").is_file()
                )
        files = [f for f in files if re.search(args.match, str(f))]
        if args.limit:
            files = files[: args.limit]
        given = {k: int(v) for k, v in (kv.split("=") for kv in args.set.split(",") if kv)}
        for path in files:
            row = study(path, args.device, args.shapes, given)
            row["name"] = path.stem if path.suffix == ".py" else path.name
            rows.append(row)
            print(f"{row['name']}: {row.get('skipped') or row['shapes']}", file=sys.stderr)
    checked = [r for r in rows if "skipped" not in r]
    weak = [r for r in checked if any(s["before"] for s in r["shapes"])]
    refused = [r for r in checked if r.get("refused")]
    print(table(rows, args.all))
    print(
        f"\n{len(rows)} problems ({len(rows) - len(checked)} skipped) on {args.device}, "
        f"{args.shapes} shapes{' with ' + args.set if args.set else ''}: a trivial answer "
        "passes the problem's own check on "
        f"{len(weak)}; after the signal check {len(refused)} refused "
        f"({', '.join(r['name'] for r in refused) or 'none'}), the rest judged relative to "
        "the output's scale where needed."
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


def _number(path: Path) -> tuple[int, str]:
    match = re.match(r"(\d+)_", path.name)
    return (int(match.group(1)) if match else 10**6, path.name)


if __name__ == "__main__":
    raise SystemExit(main())
