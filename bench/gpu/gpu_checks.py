"""GPU validation checks for the harness, one per command, each writing JSON.

``python bench/gpu/gpu_checks.py NAME --out DIR`` runs one check through the harness's public
API and writes ``DIR/NAME.json`` (the verdict, the feedback text, the numbers the
acceptance list asks for); ``summary`` reads them all, judges each acceptance item and
prints a short table (``DIR/summary.json``). ``bench/gpu/gpu_validate.sh`` runs them all.

Checks:
  vector_add    Triton vector add, two timing runs at n=2^28 (far above L2), roofline, ncu
  side_stream   a planted cheat whose kernel runs on an unjoined side stream, timed
  matmul_wgmma  bf16 matmul sized for warpgroup MMA: benchmark, roofline, dump (HGMMA)
  matmul_dump   the example's smaller-tile bf16 matmul: dump only (HMMA, flagged)
  cutedsl       the CuTeDSL vector add through the whole ladder (benchmark, dump)
  cuda          the CUDA C++ (load_inline) vector add through the whole ladder
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from harness.perf.benchstats import relative_difference  # noqa: E402
from harness.runner import LocalRunner, RunOptions, check  # noqa: E402

EX = REPO / "examples"
BIG = {"n": 1 << 28}


def _rung(verdict: Any, name: str) -> Any:
    return next((r for r in verdict.rungs if r.name == name), None)


def _bench_shapes(verdict: Any) -> list[dict[str, Any]]:
    rung = _rung(verdict, "benchmark")
    return list((rung.details or {}).get("shapes") or []) if rung else []


def _common(verdict: Any) -> dict[str, Any]:
    return {
        "ok": verdict.ok,
        "failed_rung": verdict.failed_rung.name if verdict.failed_rung else None,
        "reason": verdict.reason,
        "rungs": {r.name: r.status for r in verdict.rungs},
        "performance": verdict.performance,
        "gpu": verdict.environment.get("gpu"),
        "driver": verdict.environment.get("driver"),
    }


def vector_add(out: Path) -> dict[str, Any]:
    options = RunOptions(
        device="cuda",
        record=False,
        bench=True,
        bench_shapes=[dict(BIG), dict(BIG)],  # two independent timing runs
        profile=True,
        dump_dir=out / "dumps" / "vector_add",
    )
    verdict = check(EX / "vector_add", EX / "vector_add" / "solution_triton.py", options)
    numbers = _common(verdict)
    shapes = _bench_shapes(verdict)
    medians = [s["candidate"]["median_ms"] for s in shapes if s.get("candidate")]
    numbers["medians_ms"] = medians
    numbers["runs"] = [s["candidate"]["runs"] for s in shapes if s.get("candidate")]
    numbers["ci_rel"] = [s["candidate"]["ci_rel"] for s in shapes if s.get("candidate")]
    if len(medians) == 2:
        numbers["two_run_diff"] = relative_difference(medians[0], medians[1])
    roof = _rung(verdict, "roofline")
    if roof is not None and roof.ok:
        metrics = roof.metrics
        numbers["achieved_gbps"] = metrics.get("achieved_gbps")
        numbers["dram_ceiling_gbps"] = metrics.get("peak_gbps")
        numbers["pct_of_dram"] = metrics["achieved_gbps"] / metrics["peak_gbps"] * 100
        numbers["ceilings"] = (roof.details or {}).get("ceilings")
    profile = _rung(verdict, "profile")
    if profile is not None:
        numbers["profile_status"] = profile.status
        numbers["profile_reason"] = profile.reason
        summary = (profile.details or {}).get("summary") or {}
        numbers["ncu_duration_ms"] = summary.get("duration_ms")
        numbers["ncu_kernels"] = summary.get("kernels")
        if summary.get("duration_ms") and medians:
            numbers["bench_vs_ncu"] = medians[0] / summary["duration_ms"]
        numbers["ncu_csv"] = (profile.details or {}).get("csv")
    if shapes:
        numbers["reference_median_ms"] = (shapes[0].get("reference") or {}).get("median_ms")
        numbers["speedup"] = shapes[0].get("speedup")
        first = (shapes[0].get("rounds") or [{}])[0].get("candidate") or {}
        for key in ("clocks", "host_call_ms", "flush_ms", "lead_ms", "calibration", "escape"):
            numbers[key] = first.get(key)
    numbers["do_bench_ms"] = _do_bench_vector_add()
    if numbers["do_bench_ms"] and medians:
        numbers["bench_vs_do_bench"] = medians[0] / numbers["do_bench_ms"]
    return {"verdict": verdict, "numbers": numbers}


def _do_bench_vector_add() -> float | None:
    """The yardstick: ``triton.testing.do_bench`` (flush + events, median) on fixed inputs."""
    try:
        import importlib.util

        import torch
        import triton
        import triton.testing

        spec = importlib.util.spec_from_file_location(
            "ck_va", EX / "vector_add" / "solution_triton.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        n = BIG["n"]
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)

        def launch() -> None:
            module.add_kernel[grid](x, y, out, n, BLOCK=1024)

        return float(triton.testing.do_bench(launch, warmup=100, rep=500, return_mode="median"))
    except Exception as exc:
        print(f"do_bench yardstick failed: {exc}", file=sys.stderr)
        return None


def side_stream(out: Path) -> dict[str, Any]:
    from harness.rungs.benchmark import BenchmarkRung
    from harness.rungs.compile import CompileRung
    from harness.rungs.ladder import Ladder

    options = RunOptions(
        device="cuda",
        record=False,
        bench=True,
        bench_shapes=[dict(BIG)],
        bench_reference=False,
        shapes=[{"n": 4096}],
        policy_scan=False,
    )
    ladder = Ladder([CompileRung(), BenchmarkRung()])
    verdict = check(
        EX / "vector_add",
        REPO / "bench" / "candidates" / "side_stream_add.py",
        options,
        runner=LocalRunner(ladder),
    )
    numbers = _common(verdict)
    shapes = _bench_shapes(verdict)
    if shapes:
        numbers["reported_median_ms"] = (shapes[0].get("candidate") or {}).get("median_ms")
        escape = ((shapes[0].get("rounds") or [{}])[0].get("candidate") or {}).get("escape") or {}
        numbers["escape"] = escape
        events = ((shapes[0].get("rounds") or [{}])[0].get("candidate") or {}).get("median_ms")
        numbers["stream_events_median_ms"] = events
    honest = out / "vector_add.json"
    if honest.is_file():
        doc = json.loads(honest.read_text())
        medians = (doc.get("numbers") or {}).get("medians_ms") or []
        if medians and numbers.get("reported_median_ms"):
            numbers["honest_median_ms"] = medians[0]
            numbers["reported_over_honest"] = numbers["reported_median_ms"] / medians[0]
    return {"verdict": verdict, "numbers": numbers}


def matmul_wgmma(out: Path) -> dict[str, Any]:
    options = RunOptions(
        device="cuda",
        record=False,
        bench=True,
        bench_shapes=[{"m": 8192, "k": 8192, "n": 8192}],
        bench_budget_s=2.0,
        dump_dir=out / "dumps" / "matmul_wgmma",
    )
    verdict = check(EX / "matmul_bf16", EX / "matmul_bf16" / "solution_triton_wgmma.py", options)
    numbers = _common(verdict)
    numbers["feedback_names_roofline"] = "% of roofline" in verdict.feedback()
    dump = verdict.performance.get("dump") or {}
    numbers["mma"] = dump.get("mma")
    numbers["dump_findings"] = dump.get("findings")
    roof = _rung(verdict, "roofline")
    if roof is not None:
        numbers["roofline"] = roof.metrics
        numbers["roofline_reason"] = roof.reason
    shapes = _bench_shapes(verdict)
    if shapes:
        numbers["median_ms"] = (shapes[0].get("candidate") or {}).get("median_ms")
        numbers["reference_median_ms"] = (shapes[0].get("reference") or {}).get("median_ms")
        numbers["speedup"] = shapes[0].get("speedup")
        numbers["protocol"] = shapes[0].get("protocol")
        numbers["rounds"] = [
            {k: (r.get(k) or {}).get("median_ms") for k in ("candidate", "reference")}
            | {"clocks": (r.get("candidate") or {}).get("clocks")}
            for r in shapes[0].get("rounds") or []
        ]
    return {"verdict": verdict, "numbers": numbers}


def matmul_dump(out: Path) -> dict[str, Any]:
    options = RunOptions(device="cuda", record=False, dump_dir=out / "dumps" / "matmul_small_tiles")
    verdict = check(EX / "matmul_bf16", EX / "matmul_bf16" / "solution_triton.py", options)
    numbers = _common(verdict)
    dump = verdict.performance.get("dump") or {}
    numbers["mma"] = dump.get("mma")
    numbers["dump_findings"] = dump.get("findings")
    return {"verdict": verdict, "numbers": numbers}


def _ladder_check(out: Path, candidate: str, name: str) -> dict[str, Any]:
    options = RunOptions(
        device="cuda",
        record=False,
        bench=True,
        bench_budget_s=1.5,
        dump_dir=out / "dumps" / name,
    )
    verdict = check(EX / "vector_add", EX / "vector_add" / candidate, options)
    numbers = _common(verdict)
    numbers["all_rungs_ok"] = all(r.ok is True for r in verdict.rungs)
    numbers["feedback"] = verdict.feedback()
    shapes = _bench_shapes(verdict)
    if shapes:
        numbers["median_ms"] = (shapes[0].get("candidate") or {}).get("median_ms")
        numbers["speedup"] = shapes[0].get("speedup")
    numbers["pct_of_roofline"] = verdict.performance.get("pct_of_roofline")
    numbers["dump"] = verdict.performance.get("dump")
    return {"verdict": verdict, "numbers": numbers}


def cutedsl(out: Path) -> dict[str, Any]:
    return _ladder_check(out, "solution_cutedsl.py", "cutedsl")


def cuda(out: Path) -> dict[str, Any]:
    return _ladder_check(out, "solution_cuda.py", "cuda")


def measure_ceilings(out: Path) -> dict[str, Any]:
    """Measure the ceilings now, with the GPU to ourselves, into the cache the checks read."""
    from harness.perf import ceilings

    found = ceilings.from_measurement(ceilings.measure())
    path = ceilings.store(found)
    print(f"ceilings cached in {path}: {found.dram_gbps:.0f} GB/s, {found.tflops}")
    return {"verdict": None, "numbers": found.as_dict()}


CHECKS = {
    "ceilings": measure_ceilings,
    "vector_add": vector_add,
    "side_stream": side_stream,
    "matmul_wgmma": matmul_wgmma,
    "matmul_dump": matmul_dump,
    "cutedsl": cutedsl,
    "cuda": cuda,
}


def run_one(name: str, out: Path) -> int:
    started = time.monotonic()
    doc: dict[str, Any] = {"name": name, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        result = CHECKS[name](out)
        verdict = result["verdict"]
        doc["numbers"] = result["numbers"]
        if verdict is not None:
            doc["feedback"] = verdict.feedback()
            doc["verdict"] = verdict.to_json()
            print("\n".join(verdict.lines()))
        print(json.dumps(result["numbers"], indent=1, default=str)[:6000])
    except Exception:
        doc["error"] = traceback.format_exc()[-4000:]
        print(doc["error"], file=sys.stderr)
    doc["wall_s"] = time.monotonic() - started
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1, default=str))
    return 0 if "error" not in doc else 1


# -- acceptance ------------------------------------------------------------------------------


def _load(out: Path, name: str) -> dict[str, Any]:
    try:
        return dict(json.loads((out / f"{name}.json").read_text()))
    except (OSError, ValueError):
        return {}


def _f(value: Any, spec: str = ".1f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) else str(value)


def summary(out: Path) -> int:
    rows: list[tuple[str, bool | None, str]] = []

    def add(item: str, ok: bool | None, detail: str) -> None:
        rows.append((item, ok, detail))

    va = _load(out, "vector_add").get("numbers") or {}
    pct = va.get("pct_of_dram")
    add(
        "vector add >= 85% of measured DRAM BW",
        None if pct is None else pct >= 85.0,
        f"{_f(va.get('achieved_gbps'), '.0f')} GB/s vs copy ceiling {_f(va.get('dram_ceiling_gbps'), '.0f')} GB/s = {_f(pct)}%",
    )
    ratio = va.get("bench_vs_ncu")
    add(
        "median within 5% of ncu gpu__time_duration.sum",
        None if ratio is None else abs(ratio - 1.0) <= 0.05,
        f"bench {va.get('medians_ms', [None])[0]} ms / ncu {va.get('ncu_duration_ms')} ms = {_f(ratio, '.4f')}; do_bench {va.get('do_bench_ms')} ms",
    )
    diff = va.get("two_run_diff")
    add(
        "two timing runs within 2%",
        None if diff is None else diff <= 0.02,
        f"medians {va.get('medians_ms')} ms, differ by {_f(diff, '.4f')}",
    )
    ss = _load(out, "side_stream").get("numbers") or {}
    over = ss.get("reported_over_honest")
    escaped = (ss.get("escape") or {}).get("escaped")
    add(
        "side-stream kernel timed correctly (not ~0), escape flagged",
        None if over is None else (over > 0.8 and bool(escaped)),
        f"reported {ss.get('reported_median_ms')} ms vs honest {ss.get('honest_median_ms')} ms (x{over}); stream events saw {ss.get('stream_events_median_ms')} ms; escaped={escaped}",
    )
    mm = _load(out, "matmul_wgmma").get("numbers") or {}
    mma = " ".join(mm.get("mma") or [])
    add(
        "bf16 matmul dump shows its MMA (HGMMA/WGMMA)",
        None if not mm else "HGMMA" in mma,
        f"mma={mma or None}; small-tile example: {' '.join((_load(out, 'matmul_dump').get('numbers') or {}).get('mma') or []) or None}",
    )
    add(
        "matmul feedback names % of roofline",
        None if not mm else bool(mm.get("feedback_names_roofline")),
        f"{str(mm.get('roofline_reason'))[:140]}",
    )
    for name, label in (("cutedsl", "CuTeDSL"), ("cuda", "CUDA C++")):
        nums = _load(out, name).get("numbers") or {}
        add(
            f"{label} candidate passes the whole ladder",
            None if not nums else bool(nums.get("ok") and nums.get("all_rungs_ok")),
            f"rungs={nums.get('rungs')} median={nums.get('median_ms')} ms roofline={nums.get('pct_of_roofline')}",
        )
    pytest_rc = None
    rc_file = out / "pytest.rc"
    if rc_file.is_file():
        pytest_rc = int(rc_file.read_text().strip() or "1")
    add(
        "pytest -m gpu tests/harness",
        None if pytest_rc is None else pytest_rc == 0,
        f"exit status {pytest_rc}",
    )
    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "items": [{"item": i, "ok": ok, "detail": d} for i, ok, d in rows],
        "checks": {name: _load(out, name) for name in CHECKS},
    }
    (out / "summary.json").write_text(json.dumps(doc, indent=1, default=str))
    width = max(len(i) for i, _, _ in rows)
    print("\n" + "=" * 100)
    for item, ok, detail in rows:
        mark = "PASS" if ok else ("n/a " if ok is None else "FAIL")
        print(f"{mark}  {item.ljust(width)}  {detail[:160]}")
    return 0 if all(ok for _, ok, _ in rows) else 1


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("name", choices=[*CHECKS, "summary"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.name == "summary":
        return summary(args.out)
    return run_one(args.name, args.out)


if __name__ == "__main__":
    sys.exit(main())
