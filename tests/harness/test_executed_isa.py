"""Executed-instruction evidence (``harness/perf/isa.py``) and ``--expect-isa`` (the ``isa``
rung): parsed from ncu's raw CSV -- real H200 logs of a vector add (no per-opcode instances:
pipe activity only), of a Triton bf16 matmul (HGMMA executed) and of the same matmul in
fp32 with ``input_precision="ieee"`` (a SIMT path: FFMA), both with per-opcode instances,
and a synthetic Hopper matmul for what no capture shows yet (TMA operations)
(``fixtures/ncu/README.md``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cheatspec import FIXTURES
from pretendgpu import check_vector_add, install_tool

from harness.options import RunOptions
from harness.perf import isa, ncu
from harness.rungs.isa import IsaRung
from harness.rungs.profile import ProfileRung
from harness.rungs.results import DumpReport, Earlier, ProfileReport

H200_LOG = FIXTURES / "ncu" / "h200_vector_add_raw.csv"
HGMMA_LOG = FIXTURES / "ncu" / "synthetic_hgmma_matmul.csv"
BF16_LOG = FIXTURES / "ncu" / "h200_triton_bf16_matmul.csv"
SIMT_LOG = FIXTURES / "ncu" / "h200_triton_fp32_ieee_matmul.csv"


def _hot(path: Path) -> isa.Executed:
    hottest = isa.hot(ncu.parse_raw_csv(path.read_text()))
    assert hottest is not None
    return isa.evidence(hottest)


def test_the_h200_vector_add_ran_no_tensor_pipe_and_wgmma_fails_naming_its_pipes() -> None:
    executed = _hot(H200_LOG)
    assert executed.kernel == "add_kernel" and executed.source == "pipe activity"
    assert executed.instructions == pytest.approx(42_991_616)  # the opcode metric's total
    assert executed.tensor_idle is True
    assert executed.activity["LSU"] == pytest.approx(3.85)
    assert executed.activity["ADU"] == pytest.approx(5.50)
    assert executed.activity["TMA"] == 0 and executed.activity["tensor"] == 0
    decision = isa.expect(executed, "wgmma")
    assert decision.ok is False
    assert "add_kernel executed no wgmma" in decision.reason
    assert "tensor pipe idle" in decision.reason
    for pipe in ("ADU 5.5%", "LSU 3.9%", "FMA 1.9%"):
        assert pipe in decision.reason
    assert isa.expect(executed, "tma").ok is False  # the TMA pipe was idle too
    assert isa.expect(executed, "none").ok is True and isa.expect(executed, None).ok is True


def test_a_synthetic_hopper_matmul_counts_tma_and_folds_opcode_modifiers() -> None:
    executed = _hot(HGMMA_LOG)
    assert executed.kernel == "matmul_kernel" and executed.source == "opcodes"  # the hot one
    assert executed.families["wgmma"] == 1_048_576 and executed.families["hmma"] == 0
    assert executed.tma_ops == 65_536 and executed.fp32_ops == 131_072
    assert executed.opcodes["HGMMA"] == 1_048_576  # modifiers folded into the base opcode
    for family in ("wgmma", "hgmma", "tensor", "tma"):
        assert isa.expect(executed, family).ok is True, family
    mma_sync = isa.expect(executed, "hmma")
    assert mma_sync.ok is False and "1.05M wgmma" in mma_sync.reason
    assert "HGMMA" in mma_sync.reason
    assert isa.expect(executed, "tcgen05").ok is False
    doc = executed.as_dict()
    assert doc["tensor_families"] == {"wgmma": 1_048_576} and doc["tma_ops"] == 65_536


def test_a_triton_bf16_matmul_on_the_h200_executed_hgmma_and_no_tma() -> None:
    executed = _hot(BF16_LOG)
    assert executed.kernel == "matmul" and executed.source == "opcodes"
    assert executed.families == {"hmma": 0, "wgmma": 262_144, "tcgen05": 0}
    assert executed.opcodes["HGMMA"] == 262_144 and executed.opcodes["LDGSTS"] == 557_056
    for family in ("wgmma", "hgmma", "tensor"):
        assert isa.expect(executed, family).ok is True, family
    no_tma = isa.expect(executed, "tma")  # Triton loads through cp.async (LDGSTS) here
    assert no_tma.ok is False and "262k wgmma" in no_tma.reason and "LDGSTS" in no_tma.reason


def test_the_same_matmul_in_ieee_fp32_ran_simt_and_fails_every_tensor_family() -> None:
    executed = _hot(SIMT_LOG)
    assert executed.families == {"hmma": 0, "wgmma": 0, "tcgen05": 0}
    assert executed.fp32_ops == 268_435_456 and executed.opcodes["FFMA"] == 268_435_456
    for family in ("wgmma", "hmma", "tensor", "tcgen05"):
        decision = isa.expect(executed, family)
        assert decision.ok is False, family
        assert "tensor: none" in decision.reason and "FFMA 268M" in decision.reason
    assert isa.expect(executed, "none").ok is True


def test_instanced_cells_and_unknown_metrics_parse() -> None:
    total, values = ncu.instanced("2,101,248 (HGMMA.64x256x16.F32.BF16: 1,048,576; FFMA: 2)") or (
        0,
        {},
    )
    assert total == 2_101_248 and values == {"HGMMA.64x256x16.F32.BF16": 1_048_576, "FFMA": 2}
    assert ncu.instanced("42,991,616") is None and ncu.instanced("(1, 1, 1)") is None
    log = "==ERROR== Failed to find metric regex:^sm__inst_executed_pipe_tma.sum(.*)$"
    assert ncu.unknown_metric(log) == "sm__inst_executed_pipe_tma.sum"
    assert ncu.unknown_metric("==PROF== Connected") is None


def test_the_command_asks_for_opcode_instances_and_the_pipe_counts() -> None:
    cmd = ncu.command("ncu", "/tmp/x.csv")
    assert cmd[cmd.index("--print-metric-instances") + 1] == "details"
    assert {"ComputeWorkloadAnalysis", "InstructionStats", "SpeedOfLight"} <= set(cmd)
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(ncu.EXECUTED_METRICS)
    assert "--metrics" not in ncu.command("ncu", "/tmp/x.csv", metrics=())


def test_tensor_activity_without_opcode_counts_is_undetermined_not_a_failure() -> None:
    busy = ncu.KernelProfile(
        "mm",
        {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": 60.0},
        duration_s=1e-3,
    )
    decision = isa.expect(isa.evidence(busy), "wgmma")
    assert decision.ok is None and "cannot tell" in decision.reason


def _ctx(device: str, **options: Any) -> Any:
    return SimpleNamespace(device=device, options=RunOptions(device=device, **options))


def test_on_a_cpu_the_profile_and_isa_rungs_say_they_need_a_gpu() -> None:
    ctx = _ctx("cpu", expect_isa="wgmma")
    assert ProfileRung().enabled(ctx) and IsaRung().enabled(ctx)
    profile = ProfileRung().run(ctx, Earlier())
    found = IsaRung().run(ctx, Earlier())
    assert profile.ok is None and "no GPU (ncu" in profile.reason
    assert found.ok is None and "needs a GPU (ncu" in found.reason and "wgmma" in found.reason
    assert not IsaRung().enabled(_ctx("cpu")) and not IsaRung().enabled(
        _ctx("cpu", expect_isa="none")
    )


def test_the_isa_rung_decides_on_the_profile_it_is_handed() -> None:
    vector_add = ProfileReport({}, _hot(H200_LOG))
    matmul = ProfileReport({}, _hot(BF16_LOG))
    dump = DumpReport({"mma": ["HGMMA.64x256x16.F32.BF16"]})
    failed = IsaRung().run(_ctx("cuda", expect_isa="wgmma"), Earlier(vector_add))
    assert failed.ok is False and "busiest pipes" in failed.reason
    passed = IsaRung().run(_ctx("cuda", expect_isa="hgmma"), Earlier(matmul))
    assert passed.ok is True and passed.metrics["source"] == "opcodes"
    wrong = IsaRung().run(_ctx("cuda", expect_isa="hmma"), Earlier(matmul, dump))
    assert wrong.ok is False and "static SASS holds HGMMA.64x256x16" in wrong.reason
    nothing = IsaRung().run(_ctx("cuda", expect_isa="wgmma"), Earlier())
    assert nothing.ok is None and "no ncu profile" in nothing.reason


FAKE_NCU = r"""#!/usr/bin/env python3
# stands in for ncu: refuses the per-pipe counts as unknown (an ncu that lacks them), else
# writes a recorded CSV to --log-file and runs the wrapped command
import shutil, subprocess, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
if "--metrics" in args:
    open(log, "w").write("==ERROR== Failed to find metric regex:^sm__inst_executed_pipe_tma.sum\n")
    sys.exit(1)
shutil.copyfile("@CSV@", log)
i = 0
while i < len(args) and args[i].startswith("--"):
    i += 1 if args[i] in ("--nvtx", "--csv") else 2
sys.exit(subprocess.call(args[i:]))
"""


def test_expect_isa_fails_a_kernel_that_ran_another_family_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile rung's ncu (a stand-in replaying the H200 bf16 matmul log) wraps a real
    worker; an ncu that does not know a per-pipe count is run again without them; the
    ``isa`` rung fails ``--expect-isa hmma`` naming the wgmma the hot kernel ran."""
    install_tool(tmp_path, monkeypatch, "ncu", FAKE_NCU.replace("@CSV@", str(BF16_LOG)))
    verdict = check_vector_add(
        [ProfileRung(), IsaRung()],
        shapes=[{"n": 1000}],
        bench_shapes=[{"n": 1000}],
        expect_isa="hmma",
    )
    profile = next(r for r in verdict.rungs if r.name == "profile")
    assert profile.ok is True, profile.reason
    assert "does not know sm__inst_executed_pipe_tma.sum" in profile.reason
    assert "262k wgmma" in profile.reason
    found = next(r for r in verdict.rungs if r.name == "isa")
    assert found.ok is False and not verdict.ok
    assert "matmul executed no mma.sync" in found.reason and "262k wgmma" in found.reason
    assert verdict.performance["profile"]["executed"]["tensor_families"] == {"wgmma": 262_144}
    assert verdict.options["expect_isa"] == "hmma"
