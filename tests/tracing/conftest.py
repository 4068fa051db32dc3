"""Fixtures for the tracing tests: the recorded traces under ``fixtures/`` and a device emulator.

``emulate_kernel`` writes into a ``ck_trace`` buffer exactly what ``include/ck_trace.cuh``
makes a kernel write (open: the unit header; each begin/end: tag, clock64, globaltimer;
the count after every event), so the parsing can be tested end to end on a CPU.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def ck_fixture() -> dict[str, Any]:
    return json.loads((FIXTURES / "ck_matmul.json").read_text())


def emulate_kernel(
    buf: Any,
    grid: int,
    warps: int,
    program: Callable[[int, int], list[tuple[int, int, int]]],
    ns_per_cycle: float = 0.5,
    granularity: str = "warp",
) -> None:
    """``program(cta, warp)`` -> [(section, is_end, cycles since open)]; writes like the
    CUDA helper does (lane 0 of each warp, or thread 0 of each CTA)."""
    words = buf.view(-1)
    nonce, units, cap = int(words[1]), int(words[2]), int(words[3])
    mark = (nonce & ((1 << 30) - 1)) << 32
    stride = 8 + 3 * cap
    writers = [
        (c, w) for c in range(grid) for w in (range(warps) if granularity == "warp" else [-1])
    ]
    for cta, warp in writers:
        unit = cta * warps + warp if granularity == "warp" else cta
        if unit >= units:
            continue
        base = 8 + unit * stride
        clk0 = 1_000_000 + 5_000 * cta + 11 * max(warp, 0)
        gt0 = 1_800_000_000_000 + 2_500 * cta
        header = [nonce, 0, cta % 132, cta, warp, gt0, clk0, warps * 32]
        for i, value in enumerate(header):
            words[base + i] = value
        for n, (section, is_end, at) in enumerate(program(cta, warp)):
            if n < cap:
                e = base + 8 + 3 * n
                words[e] = mark | (section << 1) | is_end
                words[e + 1] = clk0 + at
                words[e + 2] = gt0 + int(at * ns_per_cycle)
            words[base + 1] = n + 1
