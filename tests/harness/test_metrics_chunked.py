"""A comparison past ``CHUNK_ELEMENTS`` gathers the same numbers a chunk at a time.

At upstream KernelBench sizes a whole-tensor comparison held some twenty float64 copies of
the output (the pre-checks ran out of memory on an 80 GB and a 141 GB card,
bench/RESULTS.md 2026-12-05 15:30). Here the chunked path, with chunks far smaller than the
tensors, is held to the whole-tensor one on outputs of every kind the ladder meets.
"""

from __future__ import annotations

import math

import pytest
import torch

from harness import metrics
from harness.problems import signalcheck
from harness.problems.problemspec import Tolerance

TOL = Tolerance(atol=1e-3, rtol=1e-3, precision="fp32")


def _cases() -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]]:
    g = torch.Generator().manual_seed(7)
    e = torch.randn(3, 1001, generator=g)
    close = e + 1e-5 * torch.randn(3, 1001, generator=g)
    wrong = close.clone()
    wrong[1, 17] += 5.0
    wrong[2, 900] -= 0.5
    nonfinite_e = e.clone()
    nonfinite_e[0, 3] = math.nan
    nonfinite_e[0, 4] = math.inf
    nonfinite_g = nonfinite_e.clone()
    nonfinite_g[0, 5] = math.nan  # NaN where the reference is finite
    nonfinite_g[0, 4] = -math.inf  # the other infinity
    ints = torch.randint(-5, 5, (2, 999), generator=g)
    ints_off = ints.clone()
    ints_off[1, 2] += 1
    slack = 0.01 * torch.rand(3, 1001, generator=g)
    c = torch.randn(4, 300, dtype=torch.complex64, generator=g)
    return {
        "equal": (e.clone(), e, None),
        "close": (close, e, None),
        "two wrong": (wrong, e, None),
        "non-finite": (nonfinite_g, nonfinite_e, None),
        "integers": (ints_off, ints, None),
        "slack": (wrong, e, slack),
        "zeros against zeros": (torch.zeros(5000), torch.zeros(5000), None),
        "complex": (c + 1e-2, c, None),
        "bf16": (close.bfloat16(), e.bfloat16(), None),
    }


@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("chunk", [64, 1000, 1 << 20])
def test_chunked_comparison_gives_the_whole_tensor_numbers(case: str, chunk: int) -> None:
    got, expected, slack = _cases()[case]
    whole = metrics._compare(got, expected, TOL, 5, "cpu", slack)
    parts = metrics._compare_chunked(got, expected, TOL, 5, "cpu", slack, chunk=chunk)
    assert parts.ok == whole.ok
    assert parts.reason == whole.reason
    assert (parts.total, parts.mismatches, parts.nonfinite) == (
        whole.total,
        whole.mismatches,
        whole.nonfinite,
    )
    for name in ("max_abs", "max_rel", "mse", "rmse", "psnr", "cossim"):
        a, b = getattr(parts, name), getattr(whole, name)
        assert a == pytest.approx(b, rel=1e-9, abs=1e-15) or (a == b), (name, a, b)
    # the worst elements: the same errors (which of several equal ones is named is not fixed)
    assert [repr(w["abs_err"]) for w in parts.worst] == [repr(w["abs_err"]) for w in whole.worst]
    if len({w["abs_err"] for w in whole.worst}) == len(whole.worst):
        assert [w["index"] for w in parts.worst] == [w["index"] for w in whole.worst]


def test_compare_takes_the_chunked_path_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``compare`` itself switches: with the limit lowered, a wrong element is still found,
    named by its index, with the whole-tensor reason."""
    _, expected, _ = _cases()["two wrong"]
    got = _cases()["two wrong"][0]
    before = metrics.compare(got, expected, TOL)
    monkeypatch.setattr(metrics, "CHUNK_ELEMENTS", 256)
    seen: list[int] = []
    real = metrics._compare_chunked
    monkeypatch.setattr(
        metrics, "_compare_chunked", lambda *a, **k: seen.append(1) or real(*a, **k)
    )
    after = metrics.compare(got, expected, TOL)
    assert seen and not after.ok
    assert after.reason == before.reason
    assert after.worst[0]["index"] == [1, 17]


def test_signal_check_pieces_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal check's peak and mean, a chunk at a time, give the whole-tensor values;
    its trivial answers come one at a time."""
    g = torch.Generator().manual_seed(3)
    x = 3 * torch.randn(10_000, generator=g)
    x[17] = math.nan
    x[99] = -math.inf
    peak, mean = signalcheck.output_peak(x), signalcheck._finite_mean(x)
    monkeypatch.setattr(signalcheck, "CHUNK_ELEMENTS", 333)
    assert signalcheck.output_peak(x) == peak
    assert signalcheck._finite_mean(x) == pytest.approx(mean, rel=1e-6)
    answers = signalcheck.trivial_answers(x, [x])
    assert next(answers)[0] == "zeros"  # a generator: nothing beyond the first made yet
    assert [name for name, _ in answers] == ["ones", "identity", "mean"]


@pytest.mark.parametrize("case", [c for c in _cases() if c != "integers"])
@pytest.mark.parametrize("chunk", [64, 1000])
def test_spent_fraction_a_chunk_at_a_time(case: str, chunk: int) -> None:
    """The share of its tolerance an output spent (the verdict's ``tol_spent``) is the same
    gathered a chunk at a time as over the whole tensor, computed here from its definition."""
    from harness.rungs.common import spent_fraction

    got, expected, slack = _cases()[case]
    parts = spent_fraction(got, expected, TOL, slack, chunk=chunk)

    def wide(t: torch.Tensor) -> torch.Tensor:
        return (torch.view_as_real(t) if t.is_complex() else t).double().reshape(-1)

    e, g = wide(expected), wide(got)
    finite = torch.isfinite(e)
    if bool((finite & ~torch.isfinite(g)).any()):
        assert parts == math.inf
        return
    bound = TOL.atol + TOL.rtol * e[finite].abs()
    if slack is not None:
        bound = bound + wide(slack)[finite].abs()
    whole = float(((g[finite] - e[finite]).abs() / bound).max())
    assert parts == pytest.approx(whole, rel=1e-12, abs=0.0)
    if case == "two wrong":
        assert parts > 1.0  # the wrong elements are past the tolerance


def test_small_comparisons_run_on_one_torch_thread_and_restore_the_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many small CPU comparisons on every core thrash when other checks share the machine
    (three pool slots: 3.4 s a check instead of 0.2); small ones run on one thread."""
    from harness.metrics import SMALL_OP_ELEMENTS, one_thread_if_small
    from harness.rungs import common

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with one_thread_if_small(1000):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with one_thread_if_small(SMALL_OP_ELEMENTS):
            assert torch.get_num_threads() == 2

        seen: list[int] = []
        real = common._spent_in

        def spy(*args: object) -> float:
            seen.append(torch.get_num_threads())
            return real(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(common, "_spent_in", spy)
        e = torch.linspace(-1, 1, 4096)
        spent = common.spent_fraction(e + 1e-6, e, Tolerance(atol=1e-5, rtol=0.0))
        assert seen == [1] and 0.05 < spent < 0.2
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
