#!/usr/bin/env python3
"""GPU validation of intra-kernel tracing: Proton scopes and the ck_trace helper on an H200.

Run from the repository root on the GPU machine (no network needed)::

    python3 bench/gpu/trace_validate.py --out DIR [--only triton,cuda,cutedsl,cli-triton,cli-cuda]

Steps (each one is independent: a failure is reported and the next step runs):

- ``env``: GPU, driver, torch/triton versions; whether Proton, CuTeDSL, matplotlib import.
- ``triton``: ``examples/matmul_bf16/solution_triton_traced.py`` (Proton scopes ``mainloop``
  and ``epilogue``) in this process: output checked against fp32 torch; plain median
  (flush-ahead CUDA events); the Proton-instrumented trace; overhead = the traced launch's
  globaltimer span vs the plain median, plus events-timed calls while Proton is active.
- ``cuda``: ``examples/matmul_bf16/solution_cuda_traced.py`` (``CK_TRACE_*`` macros) built
  twice with ``load_inline`` (plain, then traced: ~1 min each the first time); plain
  median, trace, instrumented median (same protocol) -> overhead.
- ``cutedsl``: ``examples/vector_add/solution_cutedsl_traced.py`` when ``nvidia-cutlass-dsl``
  imports (see shared/device.md for shipping its wheels); skipped otherwise.
- ``cli-triton`` / ``cli-cuda``: the whole ladder, ``python -m harness check ... --trace``
  (with ``--bench`` for Triton, so the overhead baseline is the benchmark median; without
  it for CUDA, so the baseline comes from the rung's plain worker).

For each trace DIR gets ``<step>.trace.json`` (Chrome/Perfetto: open in ui.perfetto.dev),
``<step>.png`` (the timeline; needs matplotlib, else render it elsewhere with
``ctxkernel runs trace-plot DIR/<step>.trace.json``), ``<step>.summary.txt``, Proton's own
``.chrome_trace`` for the Triton step, and ``results.json``. Checks printed per step:
top-level shares plus untraced time sum to ~100%, the Perfetto JSON reloads as valid
complete events. The last thing printed is a table. ``--budget`` (seconds, default 540)
skips the steps that no longer fit.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

EXAMPLES = REPO / "examples"
STEPS = ("env", "triton", "cuda", "cutedsl", "cli-triton", "cli-cuda")
SHARE_TOLERANCE = 0.02


class Skip(Exception):
    """A step that cannot run here (missing package, no GPU, no time left)."""


def log(text: str = "") -> None:
    print(text, flush=True)


def load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- shared pieces -------------------------------------------------------------------------


def perfetto_ok(path: Path) -> str:
    """'' when the file reloads as a Chrome trace of complete events, else what is wrong."""
    doc = json.loads(path.read_text())
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list) or not events:
        return "no traceEvents"
    complete = [e for e in events if e.get("ph") == "X"]
    if not complete:
        return "no complete (X) events"
    for e in complete:
        for key in ("ts", "dur", "pid", "tid", "name"):
            if key not in e:
                return f"an X event lacks {key!r}"
        if float(e["dur"]) < 0:
            return "a negative duration"
    return ""


def render(trace_json: Path, png: Path, title: str) -> str:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib missing: PNG not drawn"
    from harness.tracing.plot import plot_timeline

    plot_timeline(trace_json, png, title=title)
    return ""


def record_trace(
    step: str, out: Path, trace: Any, summary: Any, title: str, row: dict[str, Any]
) -> None:
    """Files, checks and the table row for one trace."""
    from harness.tracing.perfetto import write_chrome_trace

    lines = summary.lines()
    for line in lines:
        log("  " + line)
    total = summary.share_total()
    row.update(
        {
            "dominant": summary.dominant.name if summary.dominant else None,
            "dominant_pct": summary.dominant.share * 100 if summary.dominant else None,
            "shares": {s.name: round(s.share * 100, 2) for s in summary.ranked()},
            "untraced_pct": round(summary.untraced * 100, 2),
            "share_total_pct": round(total * 100, 2),
            "sentence": summary.sentence(),
            "units": summary.units,
            "ctas": summary.ctas,
            "ns_per_cycle": summary.ns_per_cycle,
            "clock_source": summary.clock_source,
        }
    )
    if summary.overhead is not None:
        row["overhead_pct"] = round(summary.overhead.pct, 2)
        row["instrumented_ms"] = summary.overhead.instrumented_ms
        row["baseline_ms"] = summary.overhead.baseline_ms
    checks = []
    if abs(total - 1.0) > SHARE_TOLERANCE and not summary.overlap:
        checks.append(f"shares sum to {total * 100:.1f}%, not ~100%")
    path = write_chrome_trace(trace, out / f"{step}.trace.json", summary.to_json())
    bad = perfetto_ok(path)
    if bad:
        checks.append(f"Perfetto JSON: {bad}")
    files = [path.name]
    (out / f"{step}.summary.txt").write_text("\n".join([summary.sentence(), *lines]) + "\n")
    files.append(f"{step}.summary.txt")
    why = render(path, out / f"{step}.png", title)
    if why:
        row.setdefault("notes", []).append(why)
    else:
        files.append(f"{step}.png")
    row["files"] = files
    if checks:
        row["status"] = "failed"
        row.setdefault("notes", []).extend(checks)


# -- steps -----------------------------------------------------------------------------------


def step_env(opts: argparse.Namespace, out: Path, row: dict[str, Any]) -> None:
    import torch

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            gpu=props.name,
            sms=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
        )
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    from harness.tracing.collect import sm_clock_mhz
    from harness.tracing.proton import ProtonSession

    info["proton"] = ProtonSession.unavailable_reason() or "available"
    info["sm_clock_mhz"] = sm_clock_mhz()
    for name, module in (("cutedsl", "cutlass.cute"), ("matplotlib", "matplotlib")):
        try:
            importlib.import_module(module)
            info[name] = "available"
        except Exception as exc:
            info[name] = f"missing ({type(exc).__name__})"
    for key, value in info.items():
        log(f"  {key}: {value}")
    row["env"] = info
    if not torch.cuda.is_available():
        raise Skip("no CUDA device: the trace steps need a GPU")


def _inputs(shape: dict[str, int], seed: int = 7) -> tuple[Any, Any, Any]:
    from harness.problems.problem import load_problem

    problem = load_problem(EXAMPLES / "matmul_bf16")
    inputs = problem.generate_input(seed, shape, "cuda")
    a, b = inputs
    return problem, inputs, (a.float() @ b.float())


def _check_close(out: Any, ref: Any, row: dict[str, Any]) -> None:
    rel = float((out.float() - ref).norm() / ref.norm())
    row["rel_error"] = rel
    log(f"  output vs fp32 torch: relative error {rel:.2e}")
    if rel > 2e-2:
        raise RuntimeError(f"the example's output is wrong (relative error {rel:.2e})")


def step_triton(opts: argparse.Namespace, out: Path, row: dict[str, Any]) -> None:
    from harness.tracing import install_candidate_api
    from harness.tracing.collect import time_calls_ms, trace_proton
    from harness.tracing.proton import ProtonSession
    from harness.tracing.summary import Overhead, summarize

    why = ProtonSession.unavailable_reason()
    if why:
        raise Skip(why)
    install_candidate_api("triton")
    module = load_module(EXAMPLES / "matmul_bf16" / "solution_triton_traced.py", "ckv_triton")
    size = opts.triton_size
    shape = {"m": size, "k": size, "n": size}
    row["shape"] = shape
    _, inputs, ref = _inputs(shape)

    def call(x: Any) -> Any:
        return module.custom_kernel(x)

    _check_close(call(inputs), ref, row)
    times = time_calls_ms(call, inputs, 30, 5.0)
    baseline = sorted(times)[len(times) // 2]
    log(f"  plain: median {baseline:.4g} ms over {len(times)} calls (flush ahead, events)")
    notes: list[str] = []
    keep: list[Path] = []
    scratch = Path(tempfile.mkdtemp(prefix="ckv-proton-"))
    result = trace_proton(call, inputs, scratch, 2, notes, keep=keep)
    for note in notes:
        log(f"  note: {note}")
    if isinstance(result, str):
        raise RuntimeError(result)
    trace, timing, _ = result
    if keep:
        shutil.copyfile(keep[-1], out / "triton-proton.chrome_trace")
    summary = summarize(trace)
    if timing.get("median_ms"):
        summary.overhead = Overhead(timing["median_ms"], baseline, "plain median, this process",
                                    timing["method"])  # fmt: skip
    # a second view of the cost: events around calls while Proton is active (this includes
    # Proton's per-launch synchronise and buffer copy, so it is an upper bound)
    session = ProtonSession(scratch / "proton-timed")
    try:
        session.start()
        active = time_calls_ms(call, inputs, 10, 5.0)
        row["proton_active_events_ms"] = sorted(active)[len(active) // 2]
        row["proton_active_events_pct"] = (row["proton_active_events_ms"] / baseline - 1) * 100
        log(f"  events with Proton active: median {row['proton_active_events_ms']:.4g} ms "
            f"({row['proton_active_events_pct']:+.1f}%: includes its per-launch sync and copy)")  # fmt: skip
    except Exception as exc:
        row.setdefault("notes", []).append(f"events under Proton: {type(exc).__name__}: {exc}")
    finally:
        session.finish()
    record_trace("triton", out, trace, summary, f"Triton matmul {size}^3, Proton scopes", row)
    if keep:
        row["files"].append("triton-proton.chrome_trace")


def step_cuda(opts: argparse.Namespace, out: Path, row: dict[str, Any]) -> None:
    from harness.tracing import ck_trace, install_candidate_api
    from harness.tracing.collect import time_calls_ms, trace_buffers
    from harness.tracing.summary import Overhead, summarize

    install_candidate_api("cuda_inline")
    path = EXAMPLES / "matmul_bf16" / "solution_cuda_traced.py"
    size = opts.cuda_size
    shape = {"m": size, "k": size, "n": size}
    row["shape"] = shape
    _, inputs, ref = _inputs(shape)
    os.environ[ck_trace.ENV] = "0"
    t0 = time.monotonic()
    plain = load_module(path, "ckv_cuda_plain")
    log(f"  plain build: {time.monotonic() - t0:.0f} s")
    _check_close(plain.custom_kernel(inputs), ref, row)
    times = time_calls_ms(plain.custom_kernel, inputs, 20, 5.0)
    baseline = sorted(times)[len(times) // 2]
    log(f"  plain: median {baseline:.4g} ms over {len(times)} calls")
    os.environ[ck_trace.ENV] = "1"
    try:
        t0 = time.monotonic()
        traced = load_module(path, "ckv_cuda_traced")
        log(f"  traced build: {time.monotonic() - t0:.0f} s")
        _check_close(traced.custom_kernel(inputs), ref, row)
        ck_trace.reset()
        result = trace_buffers(traced.custom_kernel, inputs, 2)
        if isinstance(result, str):
            raise RuntimeError(result)
        trace, _, _ = result
        times = time_calls_ms(traced.custom_kernel, inputs, 20, 5.0, between=ck_trace.reset)
        ck_trace.reset()
    finally:
        os.environ[ck_trace.ENV] = "0"
    instrumented = sorted(times)[len(times) // 2]
    summary = summarize(trace)
    summary.overhead = Overhead(instrumented, baseline, "plain median, this process",
                                "events, flush ahead, instrumented build")  # fmt: skip
    record_trace("cuda", out, trace, summary, f"CUDA C++ tiled matmul {size}^3, ck_trace", row)


def step_cutedsl(opts: argparse.Namespace, out: Path, row: dict[str, Any]) -> None:
    try:
        import cutlass.cute  # noqa: F401
    except Exception as exc:
        raise Skip(f"nvidia-cutlass-dsl does not import ({type(exc).__name__})") from None
    import torch

    from harness.tracing import ck_trace, install_candidate_api
    from harness.tracing.collect import time_calls_ms, trace_buffers
    from harness.tracing.summary import Overhead, summarize

    install_candidate_api("cutedsl")
    module = load_module(EXAMPLES / "vector_add" / "solution_cutedsl_traced.py", "ckv_cute")
    n = opts.cutedsl_n
    row["shape"] = {"n": n}
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    inputs = (x, y)
    os.environ[ck_trace.ENV] = "0"
    out_plain = module.custom_kernel(inputs)
    if not torch.equal(out_plain, x + y):
        raise RuntimeError("the CuTeDSL example's output is wrong")
    times = time_calls_ms(module.custom_kernel, inputs, 20, 5.0)
    baseline = sorted(times)[len(times) // 2]
    os.environ[ck_trace.ENV] = "1"
    try:
        result = trace_buffers(module.custom_kernel, inputs, 2)
        if isinstance(result, str):
            raise RuntimeError(result)
        trace, _, _ = result
        times = time_calls_ms(module.custom_kernel, inputs, 20, 5.0, between=ck_trace.reset)
        ck_trace.reset()
    finally:
        os.environ[ck_trace.ENV] = "0"
    summary = summarize(trace)
    summary.overhead = Overhead(sorted(times)[len(times) // 2], baseline, "plain median",
                                "events, flush ahead, instrumented build")  # fmt: skip
    record_trace("cutedsl", out, trace, summary, f"CuTeDSL vector add n={n}, ck_trace", row)


def _cli(step: str, candidate: Path, extra: list[str], opts: argparse.Namespace, out: Path,
         row: dict[str, Any], timeout: float) -> None:  # fmt: skip
    runs = out / "runs"
    cmd = [
        sys.executable, "-m", "harness", "check", str(EXAMPLES / "matmul_bf16"), str(candidate),
        "--trace", "--json", "--seeds", "1", "--runs-dir", str(runs), *extra,
    ]  # fmt: skip
    row["command"] = " ".join(cmd[1:])
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("CTXKERNEL_TRACE", None)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip
    (out / f"{step}.stderr.log").write_text(proc.stderr[-200_000:])
    doc = None
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                continue
    if doc is None:
        raise RuntimeError(f"exit {proc.returncode}, no verdict JSON; stderr: {proc.stderr[-800:]}")
    (out / f"{step}.verdict.json").write_text(json.dumps(doc, indent=1) + "\n")
    for rung in doc.get("rungs", []):
        metrics = " ".join(f"{k}={v}" for k, v in (rung.get("metrics") or {}).items())
        log(
            f"  [{rung['name']}] {rung.get('status')}  {metrics}  {str(rung.get('reason', ''))[:160]}"
        )
    row["verdict"] = "PASSED" if doc.get("ok") else f"FAILED at {doc.get('failed_rung')}"
    trace_rung = next((r for r in doc.get("rungs", []) if r["name"] == "trace"), None)
    if trace_rung is None or trace_rung.get("status") != "ok":
        reason = (trace_rung or {}).get("reason", "no trace rung in the verdict")
        raise RuntimeError(f"trace rung {(trace_rung or {}).get('status')}: {reason}")
    summary = (trace_rung.get("details") or {}).get("summary") or {}
    perf = (doc.get("performance") or {}).get("trace") or {}
    for line in perf.get("lines") or []:
        log("  " + line)
    overhead = summary.get("overhead") or {}
    row.update(
        {
            "dominant": summary.get("dominant"),
            "shares": {k: round(v * 100, 2) for k, v in (perf.get("shares") or {}).items()},
            "share_total_pct": round(float(summary.get("share_total") or 0) * 100, 2),
            "sentence": summary.get("sentence"),
            "overhead_pct": overhead.get("pct"),
            "baseline_source": overhead.get("baseline_source"),
        }
    )
    if row.get("dominant") and row["shares"].get(row["dominant"]) is not None:
        row["dominant_pct"] = row["shares"][row["dominant"]]
    run_dir = Path(doc.get("run_dir") or "")
    files = []
    for name in perf.get("files") or []:
        source = run_dir / name
        if source.is_file():
            target = out / f"{step}.trace.json"
            shutil.copyfile(source, target)
            files.append(target.name)
            bad = perfetto_ok(target)
            if bad:
                row["status"] = "failed"
                row.setdefault("notes", []).append(f"Perfetto JSON: {bad}")
            why = render(target, out / f"{step}.png", f"{candidate.name} via check --trace")
            if not why:
                files.append(f"{step}.png")
    row["files"] = files or ["(no timeline in the run record)"]
    if abs(row["share_total_pct"] - 100) > SHARE_TOLERANCE * 100:
        row["status"] = "failed"
        row.setdefault("notes", []).append(f"shares sum to {row['share_total_pct']}%")


def step_cli_triton(opts: argparse.Namespace, out: Path, row: dict[str, Any]) -> None:
    candidate = EXAMPLES / "matmul_bf16" / "solution_triton_traced.py"
    _cli("cli-triton", candidate, ["--bench"], opts, out, row, opts.step_timeout)


def step_cli_cuda(opts: argparse.Namespace, out: Path, row: dict[str, Any]) -> None:
    candidate = EXAMPLES / "matmul_bf16" / "solution_cuda_traced.py"
    _cli("cli-cuda", candidate, [], opts, out, row, opts.step_timeout)


RUNNERS: dict[str, Callable[[argparse.Namespace, Path, dict[str, Any]], None]] = {
    "env": step_env,
    "triton": step_triton,
    "cuda": step_cuda,
    "cutedsl": step_cutedsl,
    "cli-triton": step_cli_triton,
    "cli-cuda": step_cli_cuda,
}
# rough seconds each step needs (the CUDA steps build extensions)
NEEDS = {"env": 5, "triton": 60, "cuda": 150, "cutedsl": 60, "cli-triton": 150, "cli-cuda": 200}


def table(rows: list[dict[str, Any]]) -> list[str]:
    head = f"{'step':<11} {'status':<8} {'dominant':<22} {'sum':>7} {'overhead':>9}  {'time':>6}  files / note"
    out = [head, "-" * len(head)]
    for r in rows:
        dom = (
            f"{r['dominant']} {r['dominant_pct']:.1f}%"
            if r.get("dominant_pct") is not None
            else "-"
        )
        total = f"{r['share_total_pct']:.1f}%" if r.get("share_total_pct") is not None else "-"
        over = (
            f"{r['overhead_pct']:+.1f}%" if isinstance(r.get("overhead_pct"), (int, float)) else "-"
        )
        tail = ", ".join(r.get("files") or []) or "; ".join(r.get("notes") or [])[:80]
        if r["status"] != "ok" and r.get("notes"):
            tail = "; ".join(r["notes"])[:100]
        out.append(
            f"{r['step']:<11} {r['status']:<8} {dom[:22]:<22} {total:>7} {over:>9}  {r.get('wall_s', 0):5.0f}s  {tail}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for traces, PNGs, logs")
    parser.add_argument("--only", default=",".join(STEPS), help=f"comma list of {', '.join(STEPS)}")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for all steps")
    parser.add_argument("--step-timeout", type=float, default=300.0, help="seconds per CLI check")
    parser.add_argument(
        "--triton-size", type=int, default=4096, help="m = n = k of the Triton matmul"
    )
    parser.add_argument("--cuda-size", type=int, default=2048, help="m = n = k of the CUDA matmul")
    parser.add_argument(
        "--cutedsl-n", type=int, default=1 << 26, help="elements of the CuTeDSL add"
    )
    opts = parser.parse_args(argv)
    out: Path = opts.out
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    scratch = Path(tempfile.mkdtemp(prefix="ckv-"))
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(scratch / "torch-extensions"))
    os.environ.setdefault("TRITON_CACHE_DIR", str(scratch / "triton-cache"))
    wanted = ["env"] + [s.strip() for s in opts.only.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in RUNNERS]
    if unknown:
        parser.error(f"unknown steps: {', '.join(unknown)}")
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    gpu = True
    for step in [s for s in STEPS if s in wanted]:
        row: dict[str, Any] = {"step": step, "status": "ok"}
        rows.append(row)
        left = opts.budget - (time.monotonic() - started)
        log(f"\n== {step} ==")
        if not gpu and step != "env":
            row.update(status="skipped", notes=["no GPU"])
            continue
        if left < NEEDS[step] * 0.5:
            row.update(
                status="skipped", notes=[f"budget: {left:.0f} s left, ~{NEEDS[step]} s needed"]
            )
            log(f"  skipped: {row['notes'][0]}")
            continue
        t0 = time.monotonic()
        try:
            RUNNERS[step](opts, out, row)
        except Skip as skip:
            row.update(status="skipped", notes=[str(skip)])
            log(f"  skipped: {skip}")
            if step == "env":
                gpu = False
        except subprocess.TimeoutExpired:
            row.update(status="failed", notes=[f"timed out after {opts.step_timeout:g} s"])
            log(f"  FAILED: {row['notes'][0]}")
        except Exception as exc:
            row.update(status="failed", notes=[f"{type(exc).__name__}: {str(exc)[:400]}"])
            (out / f"{step}.traceback.txt").write_text(traceback.format_exc())
            log(f"  FAILED: {row['notes'][0]}")
        row["wall_s"] = round(time.monotonic() - t0, 1)
    (out / "results.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    shutil.rmtree(scratch, ignore_errors=True)
    log("\n" + "\n".join(table(rows)))
    return 0 if all(r["status"] in ("ok", "skipped") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
