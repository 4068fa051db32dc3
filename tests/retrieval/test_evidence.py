"""Evidence to context: a dumps finding carries the ids of the PTX section and an example
that explain it, where ``ctxkernel check`` meets an index; without one nothing changes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import evidence
from ctxkernel.workspace import Workspace
from harness.perf import dumps

from .conftest import CliResult, Repo
from .test_links import EXAMPLE, linked  # noqa: F401 - the fixture, shared

REPO = Path(__file__).resolve().parents[2]


def _doc(backend: str, *codes: str) -> dict[str, object]:
    return {
        "backend": backend,
        "performance": {"dump": {"codes": [{"code": c, "arch": 90, "kernel": "k"} for c in codes]}},
    }


def test_hmma_on_sm90_finding_gets_the_wgmma_section_and_an_example(
    linked: tuple[Workspace, Repo],  # noqa: F811
) -> None:
    ws, _ = linked
    section = ws.docs("wgmma.mma_async", ["ptx"]).best
    assert section is not None
    found = evidence.for_verdict(ws.store, _doc("cutedsl", dumps.MMA_WITHOUT_WGMMA))
    assert [e.section for e in found] == [section.id]
    assert found[0].example.startswith(f"cutlass:{EXAMPLE}:")
    text = found[0].line()
    assert section.id in text and "on sm_90" in text
    # nothing to attach: no codes, no index, or an index without the PTX manual
    assert evidence.for_verdict(ws.store, {"performance": {}}) == []
    assert evidence.for_verdict(None, _doc("triton", dumps.MMA_WITHOUT_WGMMA)) == []


def test_for_verdict_quietly_never_raises() -> None:
    def broken() -> object:
        raise RuntimeError("the index is gone")

    assert evidence.for_verdict_quietly(broken, _doc("triton", dumps.NO_TMA)) == []


@pytest.mark.skipif(not dumps.find_tools("cuobjdump"), reason="needs cuobjdump (triton ships it)")
def test_ctxkernel_check_feedback_names_the_wgmma_section_for_the_small_tile_matmul(
    linked: tuple[Workspace, Repo],  # noqa: F811
    run_cli: Callable[..., CliResult],
    tmp_path: Path,
) -> None:
    """The small-tile example matmul compiles to HMMA on sm_90: the dumps rung says so,
    and ``ctxkernel check`` adds the wgmma section's id when the PTX manual is indexed."""
    ws, _ = linked
    section = ws.docs("wgmma.mma_async", ["ptx"]).best
    assert section is not None
    res = run_cli(
        "check",
        REPO / "tests" / "harness" / "fixtures" / "matmul_bf16_small",
        REPO / "examples" / "matmul_bf16" / "solution_triton.py",
        "--dump",
        tmp_path / "dump",
        "--target",
        "sm_90",
        "--shapes",
        "m=32,k=64,n=48",
        "--feedback",
    )
    assert "without HGMMA/WGMMA" in res.out, res.out + res.err
    assert "context for mma_without_wgmma (wgmma.mma_async on sm_90)" in res.out
    assert f"section {section.id}" in res.out
