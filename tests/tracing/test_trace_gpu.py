"""The trace rung on a GPU: the traced Triton (Proton) and CUDA C++ (ck_trace) matmul examples.

Run on the device machine (``pytest -m gpu tests/tracing``); ``bench/gpu/trace_validate.py``
is the fuller, recorded validation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runner import RunOptions, check

REPO = Path(__file__).resolve().parents[2]
MATMUL = REPO / "examples" / "matmul_bf16"

pytestmark = pytest.mark.gpu


def _trace_rung(candidate: str, bench: bool) -> tuple[dict, object]:
    verdict = check(
        MATMUL,
        MATMUL / candidate,
        RunOptions(
            device="cuda",
            trials=1,
            record=False,
            trace=True,
            bench=bench,
            bench_shapes=[{"m": 2048, "k": 2048, "n": 2048}],
            bench_budget_s=1.0,
        ),
    )
    assert verdict.ok, verdict.feedback()
    rung = next(r for r in verdict.rungs if r.name == "trace")
    assert rung.ok is True, rung.reason
    return rung.details["summary"], verdict


@pytest.mark.parametrize(
    ("candidate", "bench", "backend"),
    [("solution_triton_traced.py", True, "proton"), ("solution_cuda_traced.py", False, "ck_trace")],
)
def test_traced_matmul_shares_sum_to_100_and_overhead_is_reported(
    candidate: str, bench: bool, backend: str
) -> None:
    summary, verdict = _trace_rung(candidate, bench)
    assert summary["backend"] == backend
    shares = {s["name"]: s["share"] for s in summary["sections"] if s["depth"] == 0}
    assert {"mainloop", "epilogue"} <= set(shares)
    assert summary["share_total"] == pytest.approx(1.0, abs=0.02)
    assert summary["dominant"] == "mainloop"
    assert summary["overhead"] is not None and summary["overhead"]["baseline_ms"] > 0
    assert "trace on m=2048" in verdict.feedback()  # type: ignore[attr-defined]
