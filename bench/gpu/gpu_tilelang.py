"""GPU validation of the TileLang backend: the whole ladder on both TileLang examples,
and a wrong TileLang kernel.

``python bench/gpu/gpu_tilelang.py --out DIR`` runs, through the harness's public API:

- ``vector_add``: ``examples/vector_add/solution_tilelang.py`` with ``--bench --dump``;
- ``matmul``: ``examples/matmul_bf16/solution_tilelang.py`` with ``--bench --dump``;
- ``wrong``: ``tests/harness/fixtures/tilelang/k_tail_dropped.py`` on the matmul problem
  (it must fail at correctness, the feedback naming the worst elements);

then the ``gpu``-marked TileLang tests (``pytest -m gpu``). Writes ``DIR/tilelang.json``
(every verdict's summary, dump highlights, feedback), ``DIR/tilelang-dumps.tar.gz`` (the
generated CUDA, PTX, CUBIN and SASS with the reports) and ``DIR/pytest-tilelang.log``, and
prints a table. Exit 0 when every expectation holds. On the H200 the tilelang wheels come
from ``bench/gpu/prepare-tilelang-wheels.sh`` (its tail comment has the commands).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.runner import LocalRunner, RunOptions, check  # noqa: E402

EX = REPO / "examples"
WRONG = REPO / "tests" / "harness" / "fixtures" / "tilelang" / "k_tail_dropped.py"
LADDER = ("pre-checks", "compile", "run", "correctness", "anti-cheat", "benchmark", "roofline")


def _dump_highlights(verdict: Any) -> dict[str, Any]:
    rung = next((r for r in verdict.rungs if r.name == "dumps"), None)
    summary = ((rung.details or {}).get("dump") or {}) if rung else {}
    reports = summary.get("reports") or []
    return {
        "status": rung.status if rung else None,
        "reason": rung.reason if rung else None,
        "sass": summary.get("sass"),
        "kernels": [
            {
                "kernel": r.get("kernel"),
                "registers": r.get("registers"),
                "shared_bytes": r.get("shared_bytes"),
                "spills": (r.get("spill_stores") or 0) + (r.get("spill_loads") or 0),
                "mma": (r.get("sass") or {}).get("mma_forms"),
                "HGMMA": (r.get("sass") or {}).get("HGMMA"),
                "UTMALDG": (r.get("sass") or {}).get("UTMALDG"),
                "global_loads": (r.get("sass") or {}).get("global_loads"),
                "files": r.get("files"),
            }
            for r in reports
        ],
        "findings": summary.get("findings"),
        "notes": summary.get("notes"),
    }


def run_one(
    name: str, problem: Path, candidate: Path, out: Path, bench: bool, device: str
) -> dict[str, Any]:
    started = time.monotonic()
    dump_dir = (out / "dumps" / name) if bench else None
    options = RunOptions(device=device, record=False, bench=bench, dump_dir=dump_dir)
    try:
        verdict = check(problem, candidate, options, runner=LocalRunner())
    except Exception as exc:  # a harness error is a result here, not a crash of the script
        return {"name": name, "error": f"{type(exc).__name__}: {exc}"}
    summary = verdict.summary
    return {
        "name": name,
        "ok": verdict.ok,
        "failed_rung": verdict.failed_rung.name if verdict.failed_rung else None,
        "reason": verdict.reason,
        "rungs": {r.name: r.status for r in verdict.rungs},
        "summary": summary.to_json() if summary else None,
        "dump": _dump_highlights(verdict),
        "feedback": verdict.feedback(),
        "environment": {k: verdict.environment.get(k) for k in ("gpu", "driver", "tilelang")},
        "wall_s": round(time.monotonic() - started, 1),
    }


def judge(results: dict[str, dict[str, Any]]) -> list[str]:
    """What failed of the acceptance list (empty: all held)."""
    problems = []
    for name in ("vector_add", "matmul"):
        r = results[name]
        if not r.get("ok"):
            problems.append(f"{name}: {r.get('error') or r.get('reason')}")
            continue
        for rung in LADDER:
            if r["rungs"].get(rung) != "ok":
                problems.append(f"{name}: {rung} is {r['rungs'].get(rung)}")
        if (r["dump"] or {}).get("status") != "ok" or not r["dump"].get("sass"):
            problems.append(f"{name}: no dumps with SASS ({(r['dump'] or {}).get('reason')})")
    mm = results["matmul"]
    if mm.get("ok") and not any(k.get("HGMMA") for k in mm["dump"]["kernels"]):
        problems.append("matmul: no HGMMA in the SASS")
    wrong = results["wrong"]
    if wrong.get("failed_rung") != "correctness":
        problems.append(f"wrong: failed at {wrong.get('failed_rung')}, not correctness")
    elif "worst mismatches" not in wrong.get("feedback", ""):
        problems.append("wrong: the feedback shows no worst elements")
    return problems


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"{'check':<11} {'verdict':<22} {'time':>10} {'roofline':>9} {'speedup':>8} {'bound':<8} dump",
    ]
    for name, r in results.items():
        verdict = "PASSED" if r.get("ok") else f"FAILED {r.get('failed_rung') or r.get('error')}"
        s = r.get("summary") or {}
        time_ms = f"{s['time_ms']:.4g} ms" if s.get("time_ms") else "-"
        pct = f"{s['pct_of_roofline']:.1f}%" if s.get("pct_of_roofline") is not None else "-"
        speedup = f"{s['speedup']:.3g}x" if s.get("speedup") is not None else "-"
        kernels = (r.get("dump") or {}).get("kernels") or []
        dump = "; ".join(
            f"{k['kernel']} regs={k['registers']} spills={k['spills']} mma={k['mma']} "
            f"TMA={k['UTMALDG']} LDG={k['global_loads']}"
            for k in kernels
        )
        lines.append(
            f"{name:<11} {verdict[:22]:<22} {time_ms:>10} {pct:>9} {speedup:>8} {s.get('bound') or '-':<8} {dump or '-'}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-pytest", action="store_true", help="Skip the gpu-marked tests.")
    parser.add_argument(
        "--device", default="cuda", help="cpu: a dry run of this script (TileLang stops at compile)"
    )
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    va, mm = EX / "vector_add", EX / "matmul_bf16"
    results = {
        "vector_add": run_one(
            "vector_add", va, va / "solution_tilelang.py", out, True, args.device
        ),
        "matmul": run_one("matmul", mm, mm / "solution_tilelang.py", out, True, args.device),
        "wrong": run_one("wrong", mm, WRONG, out, False, args.device),
    }
    if not args.no_pytest:
        log = out / "pytest-tilelang.log"
        with open(log, "w") as fh:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider",
                 "tests/harness/test_harness_tilelang.py"],
                cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        results["pytest"] = {"returncode": proc.returncode, "tail": log.read_text()[-1500:]}
    dumps = out / "dumps"
    if dumps.is_dir():
        with tarfile.open(out / "tilelang-dumps.tar.gz", "w:gz") as tar:
            tar.add(dumps, arcname="dumps")
    problems = judge(results)
    if results.get("pytest", {}).get("returncode") not in (None, 0):
        problems.append("pytest -m gpu tests/harness/test_harness_tilelang.py failed")
    results["problems"] = problems  # type: ignore[assignment]
    (out / "tilelang.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    print(table({k: v for k, v in results.items() if k in ("vector_add", "matmul", "wrong")}))
    print("wrong's feedback:\n" + "\n".join(results["wrong"].get("feedback", "").splitlines()[:12]))
    print("ACCEPTANCE: " + ("all held" if not problems else "; ".join(problems)))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
