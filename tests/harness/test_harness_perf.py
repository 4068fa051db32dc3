"""The performance rungs on a CPU: benchmark statistics, the timing protocol on a simulated GPU clock,
ceilings and the roofline, the physics floor, ncu CSV parsing, SASS/PTX analysis, the
ahead-of-time ``--dump --target sm_90`` path for Triton, and the performance rungs
reporting "skipped" without a GPU.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from cheatspec import EXAMPLES, FIXTURES
from simgpu import FakeGPU, _config, simulated_bench

from harness.perf import benchstats, ceilings, dumps, ncu
from harness.perf.ceilings import Ceilings
from harness.problems.problem import load_problem
from harness.runner import LocalRunner, RunOptions, check
from harness.verdict import RungResult, Verdict
from harness.worker import timing

REPO = Path(__file__).resolve().parents[2]
H200 = Ceilings(
    key="H200 test",
    gpu="NVIDIA H200",
    dram_gbps=4240.0,
    tflops={"bf16": 786.0, "fp16": 780.0, "tf32": 390.0, "fp32": 51.0},
    l2_bytes=60 << 20,
)


# -- statistics ----------------------------------------------------------------------------


def test_median_ci_narrows_with_samples_and_converges() -> None:
    rng = random.Random(1)
    few = [1.0 + rng.gauss(0, 0.02) for _ in range(20)]
    many = [1.0 + rng.gauss(0, 0.02) for _ in range(400)]
    assert benchstats.relative_ci_halfwidth(many) < benchstats.relative_ci_halfwidth(few)
    assert not benchstats.converged(few, rel_ci=0.001, min_runs=10)
    assert benchstats.converged(many, rel_ci=0.01, min_runs=10)
    lo, hi = benchstats.median_ci(many)
    assert lo < benchstats.quantile(sorted(many), 0.5) < hi


def test_summary_reports_median_min_iqr_and_runs() -> None:
    summary = benchstats.summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert summary.median == 3.0 and summary.min == 1.0 and summary.runs == 5
    assert summary.iqr == pytest.approx(2.0)  # q1 = 2, q3 = 4 (linear interpolation)
    doc = summary.as_dict()
    assert doc["median_ms"] == pytest.approx(3000.0) and doc["runs"] == 5


def test_stop_rule_converges_on_quiet_samples_and_stops_on_budget_otherwise() -> None:
    rule = benchstats.StopRule(rel_ci=0.01, min_runs=10, budget_s=5.0, check_every=5)
    quiet = [1.0 + 0.001 * (i % 3) for i in range(10)]
    assert rule.done(quiet, elapsed_s=0.1) == "converged"
    rng = random.Random(2)
    noisy = [rng.uniform(0.5, 1.5) for _ in range(10)]
    assert rule.done(noisy, elapsed_s=0.1) is None
    assert rule.done(noisy, elapsed_s=6.0) == "budget"
    assert rule.done([1.0] * 2000, elapsed_s=0.0) == "max_runs"
    assert benchstats.relative_difference(1.0, 1.02) == pytest.approx(0.02)


# -- the timing protocol on a simulated GPU ------------------------------------------------


def test_timing_reports_kernel_time_and_keeps_a_keyed_sample(fake_gpu: FakeGPU) -> None:
    bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)

    def kernel(inputs: Any) -> torch.Tensor:
        fake_gpu.now += 0.5
        return inputs * 2

    report, kept = bench.run(kernel, lambda i: torch.full((8,), float(i)), _config())
    assert report["stop"] == "converged"
    assert benchstats.summarize(report["events_ms"]).median == pytest.approx(0.5)
    assert not timing.escape_findings(report)["escaped"]
    assert report["l2"] == "flush" and report["flush_bytes"] == 1 << 16
    assert kept and set(kept) <= set(report["indices"])
    for index, out in kept.items():  # each kept output belongs to its own call's inputs
        assert torch.equal(out, torch.full((8,), 2.0 * index))
    again, _ = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16).run(
        kernel, lambda i: torch.full((8,), float(i)), _config()
    )
    assert again["kept"] == report["kept"]  # the key, not the candidate, decides


def test_work_left_on_a_side_stream_is_caught_and_timed(fake_gpu: FakeGPU) -> None:
    bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)

    def hides_work(inputs: Any) -> torch.Tensor:
        fake_gpu.now += 0.001  # the stream sees almost nothing
        fake_gpu.side += 0.75  # the real work runs on a side stream
        return inputs

    report, _ = bench.run(hides_work, lambda i: torch.ones(4), _config())
    found = timing.escape_findings(report)
    assert found["escaped"]
    assert benchstats.summarize(report["events_ms"]).median < 0.01
    assert benchstats.summarize(found["inclusive_ms"]).median == pytest.approx(0.751, abs=0.01)


def test_a_launch_the_lead_did_not_cover_is_not_counted_and_the_lead_grows(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call whose host path (0.15 ms) outlasts the lead leaves the GPU waiting, and its
    events count the wait: such calls are dropped and the lead doubled until it covers."""
    from harness.rungs.benchmark import _mode_words

    bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)
    host_s = 0.15e-3
    monkeypatch.setattr(timing.Bench, "_covered", lambda self, start: self.lead_s >= host_s)

    def kernel(inputs: Any) -> torch.Tensor:
        fake_gpu.now += 0.5 + max(0.0, host_s - bench.lead_s) * 1e3  # the wait, then the kernel
        return inputs

    report, _ = bench.run(kernel, lambda i: torch.ones(4), _config())
    assert report["uncovered"] == {"dropped": 4, "counted": 0}  # 0 -> 0.02 -> 0.06 -> 0.14 -> 0.3
    assert report["lead_start_ms"] == 0 and report["lead_ms"] == pytest.approx(0.3)
    assert max(report["events_ms"]) == pytest.approx(0.5)  # no wait was counted
    assert not timing.escape_findings(report)["escaped"]  # the longer spin is no escaped work
    assert "after 4 launch(es) the lead did not cover" in _mode_words(report)


def test_a_call_never_covered_is_counted_at_the_longest_lead_and_said(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that waits for the GPU itself is never covered: the lead stops at
    ``MAX_LEAD_S``, the calls are timed as they are, and the verdict's words say so."""
    from harness.rungs.benchmark import _mode_words

    bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)
    monkeypatch.setattr(timing.Bench, "_covered", lambda self, start: False)

    def kernel(inputs: Any) -> torch.Tensor:
        fake_gpu.now += 0.5
        return inputs

    report, _ = bench.run(kernel, lambda i: torch.ones(4), _config())
    assert report["lead_ms"] == pytest.approx(timing.MAX_LEAD_S * 1e3)
    assert report["uncovered"]["dropped"] == 8
    assert report["uncovered"]["counted"] == len(report["events_ms"]) >= 10
    assert "counted with the launch not covered" in _mode_words(report)


def test_keep_priority_is_a_stable_bottom_k() -> None:
    kept = timing._Kept(key=5, budget=3 * 32)
    for i in range(50):
        kept.offer(i, torch.zeros(8))
    expected = sorted(range(50), key=lambda i: timing.keep_priority(5, i))[:3]
    assert sorted(kept.outputs()) == sorted(expected)
    assert timing.bench_seed(1, 2) == timing.bench_seed(1, 2) != timing.bench_seed(1, 3)
    assert timing.throttle_names(0x4 | 0x1) == ["gpu_idle", "sw_power_cap"]


def test_input_sets_rotate_only_when_the_working_set_fits_in_l2() -> None:
    from harness.worker.benchworker import input_sets_for

    l2 = 60 << 20
    assert input_sets_for(3 << 30, l2) == 1
    assert input_sets_for(40 << 20, l2) == 3
    assert input_sets_for(1 << 10, l2) == 8


def test_parent_verifies_timed_outputs_after_the_fact() -> None:
    from harness.rungs.benchmark import _verify

    problem = load_problem(EXAMPLES / "vector_add")
    shape, key = {"n": 5000}, 7

    class Session:
        def __init__(self, corrupt: int | None) -> None:
            self.corrupt = corrupt

        def request(self, header: dict[str, Any], tensors: list[torch.Tensor], *_: Any) -> Any:
            out, picks = [], []
            for pick in header["picks"]:
                x, y = problem.generate_input(timing.bench_seed(key, pick["index"]), shape, "cpu")
                value = x + y
                if pick["index"] == self.corrupt:
                    value[123] += 1.0
                picks.append({**pick, "t": len(out)})
                out.append(value if pick["t"] is None else value[tensors[pick["t"]]])
            head = {"op": "bench_sample", "picks": picks, "nonce": header["nonce"]}
            return SimpleNamespace(header=head, tensors=out)

    ctx = SimpleNamespace(problem=problem, device="cpu")
    reply = {"report": {"kept": [3, 8, 11]}}
    assert _verify(ctx, Session(None), reply, shape, key, random.Random(0)) is None  # type: ignore[arg-type]
    message = _verify(ctx, Session(8), reply, shape, key, random.Random(0))  # type: ignore[arg-type]
    assert message and "timed call returned a wrong result" in message and "call 8" in message


# -- ceilings, roofline, physics floor -----------------------------------------------------


def test_ceilings_cache_is_keyed_on_gpu_driver_and_clocks(tmp_path: Path) -> None:
    identity = {"gpu": "NVIDIA H200", "driver": "580.159.04", "max_sm_clock_mhz": 1980}
    key = ceilings.cache_key(identity)
    assert key != ceilings.cache_key({**identity, "driver": "590.1"})
    assert key != ceilings.cache_key({**identity, "max_sm_clock_mhz": 1755})
    file = tmp_path / "ceilings.json"
    assert ceilings.load_cached(key, file) is None
    stored = Ceilings(key=key, gpu="NVIDIA H200", dram_gbps=4240.0, tflops={"bf16": 786.0})
    ceilings.store(stored, file)
    assert ceilings.load_cached(key, file) == stored
    assert ceilings.load_cached(ceilings.cache_key({**identity, "driver": "x"}), file) is None
    assert ceilings.cache_file().parent.name == "cache"  # CTXKERNEL_HOME/cache in tests


def test_the_newest_cached_ceilings_of_a_gpu_model_are_what_the_agent_is_told(
    tmp_path: Path,
) -> None:
    from ctxkernel.agent.prompt import harness_ceilings

    file = tmp_path / "ceilings.json"
    assert ceilings.latest_cached("NVIDIA H200", file) is None
    for key, at, dram in (("a", "2026-12-01", 4000.0), ("b", "2026-12-03", 4240.0)):
        ceilings.store(
            Ceilings(key=key, gpu="NVIDIA H200", dram_gbps=dram, tflops={}, measured_at=at), file
        )
    ceilings.store(Ceilings(key="c", gpu="NVIDIA B200", dram_gbps=7000.0, tflops={}), file)
    newest = ceilings.latest_cached("NVIDIA H200", file)
    assert newest is not None and newest.dram_gbps == 4240.0
    assert ceilings.latest_cached("NVIDIA A100", file) is None
    ceilings.store(
        Ceilings(key="d", gpu="NVIDIA H200", dram_gbps=4300.0, tflops={"bf16": 786.0},
                 l2_bytes=60 << 20, measured_at="2026-12-04"),
        ceilings.cache_file(),
    )  # fmt: skip
    told = harness_ceilings("cuda", "NVIDIA H200")
    assert told == {"DRAM": "4300 GB/s", "dense bf16": "786 TFLOP/s", "L2": "60 MiB"}
    assert harness_ceilings("cpu", "NVIDIA H200") == {}


def test_roofline_of_a_copy_like_and_a_matmul_kernel() -> None:
    n = 1 << 28
    add = ceilings.roofline(0.80e-3, float(n), 12.0 * n, H200, "fp32")
    assert add.bound == "memory"
    assert add.achieved_gbps == pytest.approx(12.0 * n / 0.80e-3 / 1e9)
    assert add.pct == pytest.approx(100 * (12.0 * n / 4240e9) / 0.80e-3)
    assert "of roofline (memory-bound" in add.sentence()
    m = 8192
    mm = ceilings.roofline(2.0e-3, 2.0 * m**3, 6.0 * m * m, H200, "bf16")
    assert mm.bound == "compute" and mm.achieved_tflops == pytest.approx(2.0 * m**3 / 2e-3 / 1e12)
    assert 60 < mm.pct < 80


def test_physics_floor_and_the_bytes_that_can_stay_in_l2() -> None:
    n = 1 << 28
    floor, why = ceilings.physics_floor(float(n), 12.0 * n, H200, "fp32")
    assert floor == pytest.approx(12.0 * n / (4240e9 * ceilings.BANDWIDTH_MARGIN))
    assert "GB/s" in why
    assert ceilings.floor_bytes(100.0, 40.0, 60 << 20, flushed=True) == 60.0
    assert ceilings.floor_bytes(100e6, 40e6, 60 << 20, flushed=False) == 0.0
    floor_mm, why_mm = ceilings.physics_floor(2.0 * 8192**3, 0.0, H200, "bf16")
    assert "TFLOP/s" in why_mm and floor_mm == pytest.approx(2.0 * 8192**3 / (786e12 * 1.5))


def test_roofline_rung_fails_an_impossible_time_and_flags_big_speedups() -> None:
    from harness.rungs.results import ShapeTiming
    from harness.rungs.roofline import analyse

    problem = load_problem(EXAMPLES / "vector_add")
    ctx = SimpleNamespace(problem=problem, options=RunOptions())
    n = 1 << 28
    base = {
        "label": f"n={n}",
        "shape": {"n": n},
        "flushed": True,
        "output_bytes": 4 * n,
        "input_bytes": 8 * n,
        "outputs": [{"dtype": "float32"}],
    }

    def timed(median_ms: float, speedup: float) -> ShapeTiming:
        record = {**base, "candidate": {"median_ms": median_ms}, "speedup": speedup}
        return ShapeTiming.from_record(record)

    honest = analyse(ctx, timed(0.78, 1.1), H200)  # type: ignore[arg-type]
    assert "exploit" not in honest and 90 < honest["metrics"]["pct_of_roofline"] < 100
    fast = analyse(ctx, timed(0.01, 80.0), H200)  # type: ignore[arg-type]
    assert fast["exploit"].startswith("timing exploit")
    assert "80.0x faster than the reference" in fast["review"][0]


def test_verdict_carries_performance_and_feedback_names_the_roofline() -> None:
    rung = RungResult(
        "roofline", True, True, {"pct_of_roofline": 91.5}, "n=268435456: 91.5% of roofline"
    )
    verdict = Verdict(
        ok=True,
        problem="vector_add",
        problem_format="native",
        candidate="c.py",
        backend="triton",
        device="cuda",
        interpreter=False,
        rungs=[rung, RungResult("profile", None, False, {}, "ncu not found")],
        performance={
            "pct_of_roofline": 91.5,
            "roofline": "91.5% of roofline (memory-bound)",
            "shape": "n=1",
        },
    )
    doc = verdict.to_json()
    assert doc["performance"]["pct_of_roofline"] == 91.5
    assert Verdict.from_json(doc).performance == verdict.performance
    text = verdict.feedback()
    assert "91.5% of roofline" in text and "[profile] skipped" in text
    assert verdict.ok and verdict.failed_rung is None


# -- ncu ---------------------------------------------------------------------------------


def test_ncu_raw_csv_parses_into_a_summary() -> None:
    text = (FIXTURES / "ncu" / "synthetic_two_kernels.csv").read_text()
    profiles = ncu.parse_raw_csv(text)
    assert [p.name.split("(")[0] for p in profiles] == [
        "add_kernel",
        "void at::native::reduce_kernel<512, 1>",
    ]
    assert profiles[0].duration_s == pytest.approx(745632e-9)
    assert profiles[0].values["dram__bytes.sum"] == pytest.approx(3221504000)
    summary = ncu.summarize(profiles)
    assert summary["kernels"] == 2
    assert summary["duration_ms"] == pytest.approx((745632 + 4368) * 1e-6)
    assert 90 < summary["dram_pct"] < 91.52  # duration-weighted
    assert summary["top_stalls"][0]["reason"] == "long_scoreboard"
    assert "selected" not in [s["reason"] for s in summary["top_stalls"]]
    line = ncu.sentence(summary)
    assert "DRAM" in line and "long_scoreboard" in line


@pytest.mark.parametrize(
    ("log", "words"),
    [
        ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "permission"),
        ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", "counters"),
        ("==PROF== No kernels were profiled.", "no kernel"),
        ("==PROF== Connected", None),
    ],
)
def test_ncu_says_why_it_could_not_profile(log: str, words: str | None) -> None:
    reason = ncu.unavailable_reason(log)
    assert (reason is None) if words is None else (words in (reason or ""))


def test_ncu_command_profiles_only_the_candidate_range() -> None:
    cmd = ncu.command("ncu", "/tmp/x.csv")
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert (
        "ctxkernel_candidate/" in cmd and "--csv" in cmd and cmd[cmd.index("--page") + 1] == "raw"
    )
    assert {"SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "WarpStateStats"} <= set(cmd)


# -- SASS / PTX analysis ------------------------------------------------------------------

SASS = """
        Function : matmul_kernel
        /*0100*/                   LDG.E.U16 R4, desc[UR6][R2.64] ;
        /*0110*/                   LDG.E.U16 R5, desc[UR6][R2.64+0x2] ;
        /*0120*/                   HMMA.16816.F32.BF16 R8, R12, R16, R8 ;
        /*0130*/                   STL [R1], R8 ;
        /*0140*/                   LDL R9, [R1] ;
        /*0150*/               @P0 STG.E.128 desc[UR6][R6.64], R8 ;
"""


def test_sass_counts_and_expert_findings() -> None:
    counts = dumps.count_sass(SASS)
    assert counts["HMMA"] == 1 and counts["HGMMA"] == 0
    assert counts["LDL"] == 1 and counts["STL"] == 1
    assert counts["global_loads"] == {"16": 2} and counts["global_stores"] == {"128": 1}
    report = dumps.KernelReport(
        "matmul_kernel", "v1", "triton", ".", sass=counts, spill_stores=8, spill_loads=8
    )
    found = " | ".join(text for _, text in dumps.classify(report, expect_mma=True, arch=90))
    assert (
        "without HGMMA/WGMMA" in found
        and "LDL" in found
        and "narrow" in found
        and "spills" in found
    )


def test_resource_reports_parse() -> None:
    usage = dumps.parse_res_usage(
        "Resource usage:\n Common:\n  GLOBAL:0\n Function add_kernel:\n  REG:26 STACK:0 SHARED:0 LOCAL:8 CONSTANT[0]:576 TEXTURE:0\n"
    )
    assert usage["add_kernel"]["REG"] == 26 and usage["add_kernel"]["LOCAL"] == 8
    entries = dumps.parse_ptxas(
        "ptxas info    : Compiling entry function 'add_kernel' for 'sm_90a'\n"
        "ptxas info    : Function properties for add_kernel\n"
        "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 0 barriers, 1024 bytes smem\n"
    )
    assert entries["add_kernel"] == {
        "stack": 16,
        "spill_stores": 8,
        "spill_loads": 4,
        "registers": 40,
        "smem": 1024,
    }


# -- the ladder on a CPU -------------------------------------------------------------------


def _opts(**more: Any) -> RunOptions:
    return RunOptions(device="cpu", trials=1, burst=2, record=False, timeout_s=120.0, **more)


@pytest.fixture(scope="module")
def aot_verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Verdict, Path]]:
    """Two CPU checks with ``--dump DIR --target sm_90`` (and --bench/--profile, which must
    report skipped), run once for the tests below."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = {
        "vector_add": (
            EXAMPLES / "vector_add",
            EXAMPLES / "vector_add" / "solution_triton.py",
            [{"n": 4096}],
        ),
        "matmul": (
            FIXTURES / "matmul_bf16_small",
            EXAMPLES / "matmul_bf16" / "solution_triton_wgmma.py",
            [{"m": 32, "k": 64, "n": 48}],
        ),
    }

    def one(name: str) -> tuple[Verdict, Path]:
        problem, candidate, shapes = jobs[name]
        out = tmp_path_factory.mktemp(f"dump-{name}")
        options = _opts(shapes=shapes, dump_dir=out, target="sm_90", bench=True, profile=True)
        return check(problem, candidate, options, runner=LocalRunner()), out

    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(one, name) for name in jobs}
        return {name: f.result() for name, f in futures.items()}


def test_aot_dump_for_sm90_on_a_cpu_vector_add(
    aot_verdicts: dict[str, tuple[Verdict, Path]],
) -> None:
    verdict, out = aot_verdicts["vector_add"]
    assert verdict.ok, verdict.feedback()
    rungs = {r.name: r for r in verdict.rungs}
    assert rungs["dumps"].ok is True, rungs["dumps"].reason
    assert rungs["dumps"].metrics["target"] == "sm_90"
    ptx = next(out.rglob("add_kernel.ptx")).read_text()
    assert ".target sm_90a" in ptx
    assert "ld.global.v4.b32" in ptx  # the JIT's divisibility-by-16 hints made it through
    report = json.loads((out / "report.json").read_text())
    kernel = report["reports"][0]
    assert kernel["registers"] and kernel["spill_stores"] == 0
    for name in ("ttir", "ttgir", "llir", "cubin"):
        assert next(out.rglob(f"add_kernel.{name}"), None) is not None, name
    if dumps.find_tools("cuobjdump"):
        sass = next(out.rglob("add_kernel.sass")).read_text()
        assert "LDG.E.128" in sass
        assert kernel["sass"]["global_loads"].get("128")
    for name in ("benchmark", "roofline", "profile"):
        assert rungs[name].ok is None and rungs[name].gating is False
    assert "no GPU" in rungs["benchmark"].reason and "no GPU" in rungs["profile"].reason


def test_aot_dump_shows_warpgroup_mma_for_a_hopper_sized_matmul(
    aot_verdicts: dict[str, tuple[Verdict, Path]],
) -> None:
    verdict, out = aot_verdicts["matmul"]
    assert verdict.ok, verdict.feedback()
    ptx = next(out.rglob("matmul_kernel.ptx")).read_text()
    assert "wgmma.mma_async" in ptx
    meta = json.loads(next(out.rglob("matmul_kernel.json")).read_text())
    assert meta["num_warps"] == 8 and meta["target"] == "sm_90"
    assert meta["constexprs"]  # BM, BN, BK... as the JIT bound them on the bench shape
    if dumps.find_tools("cuobjdump"):
        assert "HGMMA" in next(out.rglob("matmul_kernel.sass")).read_text()
        assert "HGMMA" in str(verdict.performance["dump"]["mma"])


def test_cli_perf_flags(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "check",
        str(EXAMPLES / "vector_add"),
        str(EXAMPLES / "vector_add" / "solution_triton.py"),
    ]
    bad = subprocess.run(
        [*cmd, "--target", "gfx942x"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert bad.returncode == 2 and "--target" in bad.stderr
    from harness.optionspec import values_from_cli
    from harness.runner import RunOptions

    # the flags as click hands them over, back into RunOptions fields (--graph is a mode)
    values = {
        "bench": True,
        "bench_mode": True,
        "dump_dir": tmp_path,
        "target": "sm_90",
        "profile": False,
    }
    assert values_from_cli(RunOptions, values) == {
        "bench": True,
        "bench_mode": "graph",
        "dump_dir": tmp_path,
        "target": "sm_90",
        "profile": False,
    }
    help_text = subprocess.run(
        [*cmd[:4], "--help"], capture_output=True, text=True, cwd=REPO, check=False
    ).stdout
    for flag in ("--bench", "--dump", "--target", "--profile", "--compile-ref", "--l2", "--graph"):
        assert flag in help_text


CUTE_COUNT = r"""
import sys, torch
from harness.backends.cutedsl import CuteDSLBackend
counter = CuteDSLBackend().prepare_worker("cpu")
from harness.worker.guards import install_audit_guard
import os
guard = install_audit_guard(os.getcwd())  # compiles run with the guards on, as in a worker
sys.path.insert(0, sys.argv[1])
import solution_cutedsl as s
import cutlass, cuda.bindings.driver as cuda
x = torch.randn(4097); y = torch.randn(4097); o = torch.empty(4097)
args = (s._view(x, 16), s._view(y, 16), s._view(o, 16), cutlass.Int32(4097))
guard.activate()
compiled = s.cute.compile(s.vector_add, *args, cuda.CUstream(0))
try:
    compiled(*args, cuda.CUstream(0))  # no GPU: fails after the launch was counted
except Exception:
    pass
guard.deactivate()
print("VIOLATIONS", [v.message for v in guard.take_violations()])
from harness.backends.cutedsl import CAPTURED
import os
dumped = sorted(os.listdir(os.environ["CUTE_DSL_DUMP_DIR"]))
ptx = CAPTURED[0].__ptx__ or ""
print("COUNT", counter.count, "CAPTURED", len(CAPTURED), "V4", "ld.global.v4" in ptx)
print("DUMPED", " ".join(dumped))
"""


def test_cutedsl_example_compiles_for_sm90a_and_launches_are_counted(tmp_path: Path) -> None:
    pytest.importorskip("cutlass.cute")
    env = {
        "CUTE_DSL_ARCH": "sm_90a",
        "CTXKERNEL_DUMP": "1",
        "TMPDIR": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run(
        [sys.executable, "-c", CUTE_COUNT, str(EXAMPLES / "vector_add")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("COUNT")), "")
    assert line, proc.stdout[-2000:] + proc.stderr[-2000:]
    words = line.split()
    assert int(words[1]) >= 1 and int(words[3]) >= 1 and words[5] == "True"
    assert "VIOLATIONS []" in proc.stdout, proc.stdout
    dumped = next(x for x in proc.stdout.splitlines() if x.startswith("DUMPED")).split()[1:]
    assert {name.rsplit(".", 1)[-1] for name in dumped} >= {"mlir", "ptx", "cubin"}


FAKE_NCU = r"""#!/usr/bin/env python3
# stands in for ncu: writes a recorded CSV to --log-file, then runs the wrapped command
import shutil, subprocess, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
shutil.copyfile("@CSV@", log)
i = 0
while i < len(args) and args[i].startswith("--"):
    i += 1 if args[i] in ("--nvtx", "--csv") else 2
sys.exit(subprocess.call(args[i:]))
"""


def test_profile_rung_wraps_a_separate_worker_and_parses_its_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.rungs.ladder import Ladder
    from harness.rungs.profile import ProfileRung

    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.replace("@CSV@", str(FIXTURES / "ncu" / "synthetic_two_kernels.csv")))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")

    class PretendGPU:  # the parent believes in a GPU; the profiled worker runs on the CPU
        name, gating = "pretend", False

        def run(self, ctx: Any, earlier: Any) -> RungResult:
            ctx.device = "cuda"
            return RungResult.passed(self)

    options = _opts(
        shapes=[{"n": 1000}], bench_shapes=[{"n": 1000}], profile=True, dump_dir=tmp_path / "d"
    )
    verdict = check(
        EXAMPLES / "vector_add",
        EXAMPLES / "vector_add" / "solution_triton.py",
        options,
        runner=LocalRunner(Ladder([PretendGPU(), ProfileRung()])),
    )
    rung = next(r for r in verdict.rungs if r.name == "profile")
    assert rung.ok is True, rung.reason
    assert rung.metrics["kernels"] == 2 and 90 < rung.metrics["dram_pct"] < 92
    assert "long_scoreboard" in rung.reason
    assert (tmp_path / "d" / "ncu-n_1000.csv").is_file()
    assert verdict.performance["profile"]["kernels"] == 2


def test_worker_bench_request_glue_on_a_simulated_gpu(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench`` and ``bench_sample`` as the worker answers them: inputs generated from the
    key's seeds, the warm-up under the op recorder, kept outputs sampled on request."""
    from harness.worker import benchworker
    from harness.worker.guards import OpRecorder
    from harness.worker.serve import Worker

    monkeypatch.setattr(benchworker, "BENCH_DEVICE", "cpu")
    worker = Worker(None, "/tmp", "cpu")  # type: ignore[arg-type]
    worker.device = "cuda"  # the simulated GPU stands in; tensors stay on the CPU
    worker.problem = load_problem(EXAMPLES / "vector_add")
    worker.recorder = OpRecorder()
    worker.forbidden_aten = {"aten::add"}
    worker.entry = lambda inputs: inputs[0] + inputs[1]  # uses the forbidden op
    worker.bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)
    header = {
        "op": "bench",
        "shape": {"n": 3000},
        "key": 11,
        "keep_key": 5,
        "keep_bytes": 1 << 20,
        "rule": {"rel_ci": 0.01, "min_runs": 10, "budget_s": 1.0},
        "l2": "flush",
    }
    reply, _ = benchworker.handle_bench(worker, header, [])
    assert reply["ok"], reply
    assert reply["input_bytes"] == 2 * 3000 * 4 and reply["output_bytes"] == 3000 * 4
    assert reply["outputs"] == [{"dtype": "float32", "shape": [3000]}]
    assert any(
        "forbidden library op aten::add while being benchmarked" in i["message"]
        for i in reply["integrity"]
    )
    kept = reply["report"]["kept"]
    idx = torch.tensor([0, 17, 2999])
    answer, tensors = benchworker.handle_sample(
        worker,
        {
            "picks": [{"index": kept[0], "leaf": 0, "t": 0}, {"index": -5, "leaf": 0, "t": None}],
            "release": True,
        },
        [idx],
    )
    x, y = worker.problem.generate_input(timing.bench_seed(11, kept[0]), {"n": 3000}, "cpu")
    assert torch.equal(tensors[answer["picks"][0]["t"]], (x + y)[idx])
    assert answer["picks"][1]["missing"] and worker.kept == {}


def test_benchmark_and_roofline_rungs_end_to_end_on_a_simulated_gpu(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent's side (requests, re-checks, reference timing, ceilings, roofline) against
    workers answering in-process on the simulated clock."""
    from harness.rungs.benchmark import BenchmarkRung
    from harness.rungs.ladder import summarize
    from harness.rungs.results import Earlier, Roofline, Timings
    from harness.rungs.roofline import RooflineRung

    ctx, measured = simulated_bench(fake_gpu, monkeypatch, n=1 << 16)
    bench = BenchmarkRung().run(ctx, Earlier())
    assert bench.ok, bench.reason
    timings = bench.output
    assert isinstance(timings, Timings) and timings.shapes[0].median_ms == pytest.approx(0.1)
    assert timings.shapes[0].speedup == pytest.approx(2.0)
    assert bench.metrics["median_ms"] == pytest.approx(0.1) and bench.metrics["runs"] >= 10
    assert bench.metrics["speedup"] == pytest.approx(2.0) and bench.metrics["l2"] == "flushed"
    assert "L2 flushed" in bench.reason
    roof = RooflineRung().run(ctx, Earlier(timings))
    assert roof.ok, roof.reason
    expected = 100 * (12.0 * (1 << 16) / 100e9) / 0.1e-3  # bytes at 100 GB/s over 0.1 ms
    assert roof.metrics["pct_of_roofline"] == pytest.approx(expected, rel=1e-3)
    assert isinstance(roof.output, Roofline) and roof.output.bound == roof.metrics["bound"]
    assert roof.output.pct_of_roofline == roof.metrics["pct_of_roofline"]
    summary = summarize(Earlier(timings, roof.output))
    assert summary is not None and summary.time_ms == pytest.approx(0.1)
    assert summary.pct_of_roofline == roof.metrics["pct_of_roofline"]
    assert summary.speedup == pytest.approx(2.0) and summary.bound == roof.metrics["bound"]
    assert RooflineRung().run(ctx, Earlier()).status == "skipped"  # nothing was benchmarked
    assert ceilings.load_cached(ceilings.cache_key(measured["identity"])) is not None  # cached


def test_the_library_gemm_is_timed_as_a_third_subject_on_a_simulated_gpu(
    fake_gpu: FakeGPU, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GEMM whose reference is not the library's path (it upcasts) gets torch.matmul of
    its operands timed in a harness-only worker of its own (``reference_library``, loaded
    with the operands), frozen-candidate protocol and all: the speedup over it is the
    verdict's ``speedup_vs_library`` and its time the SOL's library baseline."""
    from harness.perf import baselines
    from harness.rungs.benchmark import BenchmarkRung
    from harness.rungs.ladder import summarize
    from harness.rungs.results import Earlier
    from harness.rungs.workers import Workers

    ctx, _ = simulated_bench(fake_gpu, monkeypatch, n=1 << 16)
    own = baselines.LibraryBaseline("gemm", "cuBLAS/cuBLASLt", "library", "upcasts", (0, 1))
    monkeypatch.setattr(baselines, "library_baseline", lambda *a, **k: own)
    opened: list[tuple[str, Any]] = []
    real_aux = Workers.aux

    def aux(self: Workers, role: str, env: Any = None, library_operands: Any = None) -> Any:
        opened.append((role, library_operands))
        return real_aux(self, role, env, library_operands)

    monkeypatch.setattr(Workers, "aux", aux)
    bench = BenchmarkRung().run(ctx, Earlier())
    assert bench.ok, bench.reason
    assert ("reference_library", (0, 1)) in opened
    record = bench.output.shapes[0].record
    assert record["reference_library"]["median_ms"] == pytest.approx(0.2)
    assert record["speedup_vs_library"] == pytest.approx(2.0)
    assert record["library"]["median_ms"] == pytest.approx(0.2)
    assert record["library"]["operands"] == [0, 1]
    summary = summarize(Earlier(bench.output))
    assert summary is not None and summary.speedup_vs_library == pytest.approx(2.0)


def test_ncu_log_recorded_on_an_h200_parses() -> None:
    """Regression: the log ``bench/gpu/gpu_validate.sh`` recorded (2026-11-30, H200, ncu
    2025.3.1) -- a clock warning first, NVTX columns, thousands separators."""
    text = (FIXTURES / "ncu" / "h200_vector_add_raw.csv").read_text()
    profiles = ncu.parse_raw_csv(text)
    assert [p.name for p in profiles] == ["add_kernel"]
    summary = ncu.summarize(profiles)
    assert summary["duration_ms"] == pytest.approx(0.734304)
    assert summary["dram_gbps"] == pytest.approx(4364.4, rel=1e-3)
    assert 90 < summary["dram_pct"] < 91 and summary["l2_hit_pct"] == pytest.approx(34.42)
    assert summary["achieved_occupancy_pct"] == pytest.approx(84.73)
    assert summary["top_stalls"][0]["reason"] == "long_scoreboard"


def test_a_short_call_spends_a_scaled_budget_not_the_whole_one(fake_gpu: FakeGPU) -> None:
    """A kernel that never converges (rel_ci 0) stops at a budget scaled to its calls'
    wall time (about 0.6 ms simulated each: 250 calls' worth is under the 0.25 s floor)."""
    bench = timing.Bench(device="cpu", l2=1 << 20, flush_bytes=1 << 16)

    calls = [0]

    def kernel(inputs: Any) -> torch.Tensor:
        calls[0] += 1
        fake_gpu.now += 0.3 + 0.4 * (calls[0] % 2)  # 0.3 or 0.7 ms: the CI never closes
        return inputs

    report, _ = bench.run(kernel, lambda i: torch.ones(4), _config(rel_ci=1e-9, budget_s=3.0))
    assert report["stop"] == "budget"
    assert report["rule"]["budget_s"] == pytest.approx(0.25)
    assert report["timed_s"] < 0.3
