"""Unseen shapes sized by measurement, sizes that belong together, the signal check and
mixed-scale stress inputs (``harness/unseen.py``, ``harness/signalcheck.py``,
``harness/rungs/inputs.py``, ``harness/rungs/stress.py``).

The planted cheats these close (a distribution sniffer, a zero writer on tiny outputs) and
their honest counterparts are under ``cheats/`` (``test_harness_cheats.py``); here the
honest counterparts also run on every public shape with the default timeout.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from cheatspec import FIXTURES, REPO
from conftest import VerdictPool

from harness.errors import ProblemError
from harness.options import RunOptions
from harness.problems.problem import load_problem
from harness.problems.problemspec import Tolerance
from harness.problems.signalcheck import probe, relative
from harness.problems.unseen import shape_size, size_links, unseen_shapes
from harness.rungs.inputs import Inputs
from harness.rungs.stress import _mix, mixed_slack, stress_classes
from harness.runner import LocalRunner, check
from harness.verdict import Verdict

CHEATS = Path(__file__).resolve().parent / "cheats"
ONLINE_SOFTMAX = CHEATS / "c06_honest_online_softmax.py"
PERSISTENT_LAYERNORM = CHEATS / "c06_honest_persistent_layernorm.py"
ZERO_WRITER = CHEATS / "c10_zero_writer_tiny_output.py"


def _check(problem: Path, candidate: Path, **options: Any) -> Verdict:
    # every SHAPE, two trials each, and the default timeout (30 s): what broke
    settings: dict[str, Any] = {"device": "cpu", "trials": 2, "burst": 2, "record": False}
    return check(problem, candidate, RunOptions(**(settings | options)), runner=LocalRunner())


# -- unseen shapes: work capped, budgets measured -------------------------------------------

HONEST_ROWS = [
    (FIXTURES / "softmax_rows", ONLINE_SOFTMAX),
    (FIXTURES / "layernorm_rows", PERSISTENT_LAYERNORM),
]


@pytest.fixture(scope="module")
def rows_verdicts(verdict_pool: VerdictPool) -> Iterator[VerdictPool]:
    for problem, candidate in HONEST_ROWS:
        # secret 9 derived m=383 n=17871 from m=384 n=200 and m=3 n=25000: 90x the work
        verdict_pool.submit(
            f"rows:{problem.name}", functools.partial(_check, problem, candidate, secret=9)
        )
    yield verdict_pool


@pytest.mark.parametrize("problem,candidate", HONEST_ROWS, ids=lambda p: p.stem)
def test_honest_kernel_timed_out_on_an_unseen_shape_larger_than_every_public_one(
    problem: Path, candidate: Path, rows_verdicts: VerdictPool
) -> None:
    """Regression: public shapes tall (m=384 n=200) and wide (m=3 n=25000) gave an unseen
    shape with the most rows and the longest rows; an honest online softmax and a
    persistent-rows LayerNorm timed out there (30 s) under the Triton interpreter."""
    verdict = rows_verdicts.get(
        f"rows:{problem.name}", lambda: _check(problem, candidate, secret=9)
    )
    assert verdict.ok, verdict.feedback()
    public = load_problem(problem).shapes
    biggest = max(shape_size(s) for s in public)
    for label in verdict.seeds["unseen_shapes"]:
        shape = {k: int(v) for k, v in (item.split("=") for item in label.split())}
        assert shape_size(shape) <= biggest, (label, public)


def test_unseen_shapes_never_hold_more_work_than_the_largest_public_one() -> None:
    problem = load_problem(FIXTURES / "softmax_rows")
    biggest = max(shape_size(s) for s in problem.shapes)
    for secret in range(24):
        shapes = unseen_shapes(problem, secret)
        assert len(shapes) == 2, secret
        for shape in shapes:
            assert shape_size(shape) <= biggest and shape not in problem.shapes
            assert all(v % 16 and v % 128 for v in shape.values()), shape  # still ragged
        capped = unseen_shapes(problem, secret, max_work=5000)
        assert all(shape_size(s) <= 5000 for s in capped), capped


def test_what_the_public_calls_cost_caps_the_work_and_sets_the_budget() -> None:
    problem = load_problem(FIXTURES / "softmax_rows")  # m=1 n=1, m=512 n=200, m=4 n=20000
    inputs = Inputs(problem, RunOptions(device="cpu", secret=3, timeout_s=30.0), "cpu")
    assert inputs.max_work() is None and inputs.budget(inputs.make(1, 0))[0] == 30.0
    for index, seconds in ((0, 0.05), (1, 3.0), (2, 2.5)):
        inputs.note_cost(inputs.make(index, 0), seconds)
    # 3 s for 102400 units: within half the timeout, the cap is the largest public shape
    assert inputs.max_work() == 512 * 200
    assert inputs.budget(inputs.make(1, 0))[0] == 30.0  # at least --timeout
    slow = Inputs(problem, RunOptions(device="cpu", secret=3, timeout_s=30.0), "cpu")
    for index, seconds in ((0, 0.05), (1, 25.0), (2, 20.0)):
        slow.note_cost(slow.make(index, 0), seconds)
    assert slow.max_work() == 512 * 200 / 2  # halved until projected within 15 s
    seconds, note = slow.budget(slow.make(1, 0))
    assert seconds == pytest.approx(4 * 25.0, rel=0.05)  # 4x its projection, over --timeout
    assert "the public shapes took at most 25 s a call here" in note
    slow.note_cost(slow.make(1, 1), 40.0)
    assert slow.budget(slow.make(1, 0))[0] == 4 * 30.0  # never over 4x --timeout
    assert all(shape_size(s) <= 512 * 200 / 4 for s in slow.unseen_shapes())  # 40 s: /4


HANGS_OFF_PUBLIC = """
# backend: triton
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def custom_kernel(inputs):
    x, y = inputs
    while x.numel() != 1000:  # fast on the public size, never done on another
        pass
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
"""


def test_a_timeout_on_an_unseen_shape_says_what_the_public_shapes_took(tmp_path: Path) -> None:
    candidate = tmp_path / "hangs.py"
    candidate.write_text(HANGS_OFF_PUBLIC)
    verdict = _check(
        REPO / "examples" / "vector_add", candidate, shapes=[{"n": 1000}], timeout_s=4.0,
        trials=1, policy_scan=False,
    )  # fmt: skip
    failed = verdict.failed_rung
    assert failed is not None and failed.name == "correctness", verdict.feedback()
    assert "on an unseen shape" in failed.reason and "timed out" in failed.reason
    assert "the public shapes took at most" in failed.reason, failed.reason
    assert "n=" not in failed.reason.split("unseen shape")[1]  # the shape is not named


# -- sizes that belong together (KernelBench) -----------------------------------------------

KB_GEMM_BIAS_RELU = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A matmul, a bias added, and a ReLU (the layout of level2 76_Gemm_Add_ReLU)."""

    def __init__(self, in_features, out_features, bias_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.gemm(x) + self.bias)


batch_size = 1024
in_features = 8192
out_features = 8192
bias_shape = BIAS


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
'''

KB_FUSED = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_bias_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        x = tl.load(x_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + ks[:, None], mask=(rn[None, :] < N) & (ks[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], tl.maximum(acc, 0.0), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        m, k = x.shape
        n = self.bias.shape[0]  # the problem says bias_shape = (out_features,)
        y = torch.empty((m, n), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(m, 16), triton.cdiv(n, 16))
        gemm_bias_relu[grid](x, self.gemm.weight, self.bias, y, m, n, k, BM=16, BN=16, BK=16)
        return y
"""

GEMM_SHAPE = {"batch_size": 8, "in_features": 40, "out_features": 24, "bias_shape": 24}


def _kernelbench(tmp_path: Path, bias: str) -> tuple[Path, Path]:
    level = tmp_path / "KernelBench" / "level2"
    level.mkdir(parents=True, exist_ok=True)
    problem = level / "76_Gemm_Add_ReLU.py"
    problem.write_text(KB_GEMM_BIAS_RELU.replace("BIAS", bias))
    candidate = tmp_path / "model_new.py"
    candidate.write_text(KB_FUSED)
    return problem, candidate


def test_unseen_shape_varied_bias_shape_apart_from_out_features(tmp_path: Path) -> None:
    """Regression (``--shapes batch_size=8,in_features=40,out_features=24,bias_shape=24``
    on level2 76_Gemm_Add_ReLU): an unseen shape set bias_shape=1 with out_features=39 and
    an honest fused kernel was "wrong: the output has shape [9, 1], expected [9, 39]"."""
    problem, candidate = _kernelbench(tmp_path, "(out_features,)")
    derived = load_problem(problem)
    derived.shapes = [dict(GEMM_SHAPE)]
    links = size_links(derived)
    assert dict(links.follows) == {"bias_shape": ("out_features",)} and not links.held
    for secret in range(12):
        for shape in unseen_shapes(derived, secret):
            assert shape["bias_shape"] == shape["out_features"], shape
    verdict = _check(problem, candidate, shapes=[dict(GEMM_SHAPE)], trials=1)
    assert verdict.ok, verdict.feedback()
    assert verdict.seeds["unseen_shapes"]


def test_a_size_whose_relation_cannot_be_seen_stays_as_given_and_is_named(tmp_path: Path) -> None:
    problem, candidate = _kernelbench(tmp_path, "(8192,)")  # the same size, written as a literal
    derived = load_problem(problem)
    derived.shapes = [dict(GEMM_SHAPE)]
    held = size_links(derived).held
    assert set(held) == {"bias_shape", "out_features"}, held  # out_features: the same value
    for secret in range(6):
        for shape in unseen_shapes(derived, secret):
            assert shape["bias_shape"] == shape["out_features"] == 24, shape
    verdict = _check(problem, candidate, shapes=[dict(GEMM_SHAPE)], trials=1)
    assert verdict.ok, verdict.feedback()
    correctness = next(r for r in verdict.rungs if r.name == "correctness")
    assert "the unseen shapes keep bias_shape as given" in correctness.reason, correctness.reason
    assert "out_features as given" in correctness.reason


@pytest.mark.skipif(
    not os.environ.get("CTXKERNEL_KERNELBENCH_MIRROR"),
    reason="CTXKERNEL_KERNELBENCH_MIRROR (a KernelBench checkout or git directory) not set",
)
def test_upstream_gemm_add_relu_passes_an_honest_fused_kernel(tmp_path: Path) -> None:
    mirror = Path(os.environ["CTXKERNEL_KERNELBENCH_MIRROR"])
    git = (
        ["git", "--git-dir", str(mirror)]
        if (mirror / "objects").is_dir()
        else ["git", "-C", str(mirror)]
    )
    text = subprocess.run(
        [*git, "show", "HEAD:KernelBench/level2/76_Gemm_Add_ReLU.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    problem = tmp_path / "76_Gemm_Add_ReLU.py"
    problem.write_text(text)
    candidate = tmp_path / "model_new.py"
    candidate.write_text(KB_FUSED)
    verdict = _check(problem, candidate, shapes=[dict(GEMM_SHAPE)], trials=1)
    assert verdict.ok, verdict.feedback()


# -- the signal check ------------------------------------------------------------------------

RELU_OF_UNIFORM = """
import torch

SHAPES = [{"m": 8, "n": 100}, {"m": 3, "n": 33}]
EXEMPT


def generate_input(seed, m, n):
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(m, n, generator=gen),)  # never negative: relu is the identity


def ref_kernel(inputs):
    return torch.relu(inputs[0])
"""


def _native(tmp_path: Path, text: str, name: str = "p") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "problem.py").write_text(text)
    return folder


def test_a_problem_a_copy_kernel_passes_on_every_shape_is_refused_at_load(tmp_path: Path) -> None:
    folder = _native(tmp_path, RELU_OF_UNIFORM.replace("EXEMPT", ""))
    inputs = Inputs(load_problem(folder), RunOptions(device="cpu", secret=1), "cpu")
    with pytest.raises(ProblemError, match="cannot tell an input returned as the output") as raised:
        inputs.study()
    assert "m=8 n=100" in str(raised.value) and "SIGNAL_EXEMPT" in str(raised.value)
    env = dict(os.environ, CTXKERNEL_CHECK_SERVER="0")
    done = subprocess.run(
        [sys.executable, "-m", "harness", "check", str(folder), str(ONLINE_SOFTMAX),
         "--device", "cpu", "--no-record"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "cannot tell" in errors[0], done.stderr


def test_signal_exempt_says_why_and_keeps_the_problem(tmp_path: Path) -> None:
    folder = _native(tmp_path, RELU_OF_UNIFORM.replace("EXEMPT", 'SIGNAL_EXEMPT = "relu of rand"'))
    inputs = Inputs(load_problem(folder), RunOptions(device="cpu", secret=1), "cpu")
    inputs.study()
    assert inputs.signal_summary()[0] == "signal check exempted: relu of rand"
    plain = _native(tmp_path, RELU_OF_UNIFORM.replace("EXEMPT", ""), "q")
    told = Inputs(load_problem(plain), RunOptions(device="cpu", signal_exempt="known"), "cpu")
    told.study()  # --signal-exempt: the same, for a problem that cannot say so
    bad = _native(tmp_path, RELU_OF_UNIFORM.replace("EXEMPT", "SIGNAL_EXEMPT = True"), "r")
    with pytest.raises(ProblemError, match="SIGNAL_EXEMPT: expected a sentence"):
        load_problem(bad)


def test_a_shape_where_a_trivial_answer_is_the_answer_refuses_nothing() -> None:
    """A softmax over one element is all ones; the other shapes tell ones apart."""
    problem = load_problem(REPO / "examples" / "softmax")
    inputs = Inputs(problem, RunOptions(device="cpu", secret=1), "cpu")
    inputs.study()
    assert [f.shape for fs in inputs.signal.values() for f in fs] == ["m=1 n=1"]
    assert inputs.signal_summary()[0] == ""  # nothing judged differently: no note


def test_zeros_passed_a_softmax_whose_outputs_are_all_below_atol() -> None:
    """Regression (KernelBench's Softmax at dim=393216: outputs near 2.5e-6, atol 1e-4):
    with the problem's tolerance alone a kernel writing zeros passes; the signal check
    judges those shapes relative to the output's scale (``c10_zero_writer_tiny_output``),
    and the honest online softmax still passes there, the verdict saying so."""
    problem = FIXTURES / "softmax_long_row"
    small = [{"m": 2, "n": 20000}]
    before = _check(
        problem, ZERO_WRITER, shapes=small, trials=1, signal_exempt="as before", unseen=False
    )
    assert before.ok, before.feedback()  # what the tolerance alone allowed
    honest = _check(problem, ONLINE_SOFTMAX, shapes=small, trials=1)
    assert honest.ok, honest.feedback()
    correctness = next(r for r in honest.rungs if r.name == "correctness")
    assert "judged relative to the output's scale" in correctness.reason
    assert "m=2 n=20000: zeros, mean, other input pass atol=0.0001" in correctness.reason


def test_the_relative_criterion_scales_atol_to_the_peak_and_adds_floors() -> None:
    tiny = torch.full((100,), 5e-5)
    tiny[0] = 8e-5
    tight = relative(Tolerance(1e-4, 1e-4), tiny)
    assert tight.atol == pytest.approx(8e-9) and tight.min_cossim == pytest.approx(0.9998)
    assert tight.min_psnr == 68 and tight.rtol == 1e-4
    assert relative(Tolerance(0.0, 0.0, precision="exact"), tiny) == Tolerance(
        0.0, 0.0, precision="exact"
    )
    assert relative(Tolerance(1e-5, 1e-5), torch.full((4,), 3.0)).atol == 1e-5  # never looser


def test_a_problem_check_of_its_own_judges_the_trivial_answers(tmp_path: Path) -> None:
    """GPU MODE: ``check_implementation`` decides whether a trivial answer passes."""
    problem = load_problem(FIXTURES / "gpumode_axpy")
    data = problem.generate_input(3, {"size": 100}, "cpu")
    reference = problem.ref_output(data, {"size": 100})
    assert probe(problem, "size=100", data, reference, slots=(2,)) == []
    lax = load_problem(FIXTURES / "gpumode_axpy")
    lax.check = lambda data, output: ""  # a check that accepts anything
    found = probe(lax, "size=100", data, reference, slots=(2,))
    assert found and {"zeros", "ones", "mean"} <= set(found[0].passed)


# -- mixed-scale stress inputs ---------------------------------------------------------------


def test_mixed_scales_change_parts_of_one_tensor() -> None:
    import random

    x = torch.randn(16, 100)
    before = x.clone()
    assert _mix(x, random.Random(1), ["rows", "spike", "block"])
    ratio = (x / before).abs()
    rows = ratio.median(dim=1).values
    assert (rows > 100).sum() == 1 and (rows < 0.01).sum() == 1  # a row up, a row down
    assert ((ratio > 100).sum(dim=0) >= 13).sum() >= 1  # a column scaled in (nearly) every row
    assert float(x.abs().max()) >= 999 * float(before.abs().max())  # a spike far out
    assert any(len(set(row.tolist())) < 100 for row in x)  # a block of one value
    half = torch.randn(8, 32, dtype=torch.float16)
    _mix(half, random.Random(1), ["rows", "spike"])
    assert bool(torch.isfinite(half).all()) and float(half.abs().max()) < 1e3  # milder


def test_which_stress_classes_run(tmp_path: Path) -> None:
    def classes(problem: Path, **options: Any) -> tuple[str, ...]:
        return stress_classes(
            Inputs(load_problem(problem), RunOptions(device="cpu", **options), "cpu")
        )

    assert classes(REPO / "examples" / "softmax") == ("rescale", "rows", "spike", "block")
    assert classes(FIXTURES / "gpumode_axpy") == ("rescale",)  # its own check decides
    assert classes(REPO / "examples" / "softmax", unseen=False) == ()
    head = RELU_OF_UNIFORM.replace("EXEMPT", 'SIGNAL_EXEMPT = "relu of rand"\nSTRESS = STRESS_SPEC')
    for spec, want in (
        ('{"rows": False}', ("rescale", "spike", "block")),
        ('["rescale"]', ("rescale",)),
        ("False", ()),
    ):
        folder = _native(tmp_path, head.replace("STRESS_SPEC", spec), f"s{len(want)}")
        assert classes(folder) == want, spec
    bad = _native(tmp_path, head.replace("STRESS_SPEC", '["rowz"]'), "bad")
    with pytest.raises(ProblemError, match="STRESS: unknown class 'rowz'"):
        load_problem(bad)


def test_each_element_is_judged_as_loosely_as_the_reference_is_defined_there() -> None:
    """A constant row makes a LayerNorm ill-conditioned: the slack grows there only."""
    problem = load_problem(FIXTURES / "layernorm_rows")
    inputs = Inputs(problem, RunOptions(device="cpu", secret=4), "cpu")
    made = inputs.make(1, 0, kind="mixed")
    made.leaves[0][5] = 1.5
    reference = inputs.reference(made)
    [slack] = mixed_slack(inputs, made, reference)
    assert slack is not None and slack.shape == reference.shape
    assert float(slack[5].median()) > 100 * float(slack[6].median())


def test_the_sniffer_passes_whole_tensor_rescaling(tmp_path: Path) -> None:
    """The rescaled-inputs trial alone let the distribution sniffer through: it samples
    the rescaled values too and takes the exact path. With the mixed-scale classes off,
    the sniffer passes; ``c06_distribution_sniffer`` is caught by them."""
    text = (FIXTURES / "softmax_rows" / "problem.py").read_text() + '\nSTRESS = ["rescale"]\n'
    folder = _native(tmp_path, text, "softmax_rows")
    verdict = _check(
        folder, CHEATS / "c06_distribution_sniffer.py", shapes=[{"m": 16, "n": 100}],
        secret=7, policy_scan=False,
    )  # fmt: skip
    assert verdict.ok, verdict.feedback()


def test_a_call_that_moves_much_data_is_given_time_to_move_it() -> None:
    """The inputs go out and the outputs and inputs-after come back through the channel:
    that is not the candidate's time. A call moving about a gigabyte gets seconds more than
    --timeout, and a hang's reason names the two parts apart."""
    verdict = _check(
        REPO / "examples" / "vector_add",
        CHEATS / "c15_infinite_loop.py",
        timeout_s=2,
        shapes=[{"n": 30_000_000}],  # two 120 MB inputs
        unseen=False,
    )
    assert not verdict.ok
    failed = next(r for r in verdict.rungs if r.status == "failed")
    assert "timed out after 2 s (+" in failed.reason, failed.reason
    assert "GB through the channel" in failed.reason, failed.reason


def _replies_seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[dict[str, Any], int]]:
    """Every call reply's header and tensor count, as the parent's session got them."""
    from harness.process.local import LocalSession

    seen: list[tuple[dict[str, Any], int]] = []
    request = LocalSession.request

    def spying(self: Any, header: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        reply = request(self, header, *args, **kwargs)
        if header.get("op") == "call" and reply.header.get("inputs_after") is not None:
            seen.append((reply.header, len(reply.tensors)))
        return reply

    monkeypatch.setattr(LocalSession, "request", spying)
    return seen


def _after_nodes(tree: Any) -> list[dict[str, Any]]:
    if not isinstance(tree, dict):
        return []
    if "t" in tree or "same" in tree:
        return [tree]
    kids = [*tree.get("tuple", []), *tree.get("list", [])]
    kids += [v for _, v in tree.get("dict", [])]
    return [n for kid in kids for n in _after_nodes(kid)]


def test_inputs_a_call_left_alone_are_not_sent_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a call the worker sends back only the inputs whose bytes changed (an input of
    6 GB came back after every call: a third of what a call moved); one the call wrote is
    still sent and named with how many elements changed."""
    seen = _replies_seen(monkeypatch)
    honest = _check(
        REPO / "examples" / "vector_add",
        REPO / "examples" / "vector_add" / "solution_triton.py",
        unseen=False,
    )
    assert honest.ok, honest.feedback()
    assert seen
    for header, count in seen:
        nodes = _after_nodes(header["inputs_after"])
        assert len(nodes) == 2 and all(n.get("same") is True for n in nodes), nodes
        assert count == len(header["calls"])  # the outputs only
    seen.clear()
    zeroing = _check(
        REPO / "examples" / "vector_add",
        CHEATS / "c09_mutate_inputs.py",
        unseen=False,
        policy_scan=False,
    )
    assert not zeroing.ok and "modified its input #0 (" in zeroing.reason, zeroing.reason
    header, count = seen[0]
    nodes = _after_nodes(header["inputs_after"])
    assert [("t" in n) for n in nodes] == [True, True], nodes  # both inputs were zeroed
    assert count == len(header["calls"]) + 2


def test_the_run_rung_compares_where_the_reference_lives(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run rung's look at the first output (NaN where the reference is finite) goes
    through the one comparison that moves to the reference's GPU for large outputs: in
    float64 on the host it took minutes at an upstream size (1.6 G elements)."""
    from harness.rungs import run as run_rung

    seen: list[int] = []
    real = run_rung.compare_where_it_lives

    def counting(got: torch.Tensor, expected: torch.Tensor, *args: Any, **kw: Any) -> Any:
        seen.append(expected.numel())
        return real(got, expected, *args, **kw)

    monkeypatch.setattr(run_rung, "compare_where_it_lives", counting)
    verdict = _check(
        REPO / "examples" / "vector_add",
        REPO / "examples" / "vector_add" / "solution_triton.py",
        unseen=False,
    )
    assert verdict.ok, verdict.feedback()
    assert seen and all(n > 0 for n in seen)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_perturbed_inputs_move_each_element_by_the_step_a_chunk_at_a_time(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """Every float input element moves by exactly ``1 ± step`` (both signs drawn), past
    the chunk size too, and the pristine inputs stay as they were; on a GPU the signs are
    drawn there."""
    import harness.rungs.inputs as inputs_module

    monkeypatch.setattr(inputs_module, "CHUNK_ELEMENTS", 1000)
    problem = load_problem(REPO / "examples" / "softmax")
    inputs = Inputs(problem, RunOptions(device=device, secret=3), device)
    made = inputs.make(0, 0, shape={"m": 7, "n": 1001})
    before = made.pristine[0].clone()
    seen: list[torch.Tensor] = []
    monkeypatch.setattr(problem, "ref_output", lambda moved, shape: seen.append(moved[0]) or 0)
    inputs.perturbed_reference(made.pristine, made.shape, 11)
    assert torch.equal(made.pristine[0], before)
    step = max(problem.tolerance_for(torch.float32).rtol, 4 * torch.finfo(torch.float32).eps)
    assert seen[0].device.type == device
    ratio = (seen[0].double() / before.double()).reshape(-1).cpu()
    ups = torch.isclose(ratio, torch.tensor(1 + step, dtype=torch.float64), rtol=1e-6)
    downs = torch.isclose(ratio, torch.tensor(1 - step, dtype=torch.float64), rtol=1e-6)
    assert bool((ups | downs).all())
    assert 0.4 < float(ups.double().mean()) < 0.6
    # the chunks draw different signs, not one chunk's pattern over and over
    assert not torch.equal(ups[:1000], ups[1000:2000])


_SLACK_MEMORY = r"""
import resource, sys, torch
from pathlib import Path
from harness.options import RunOptions
from harness.problems.problem import load_problem
from harness.rungs.inputs import Inputs
from harness.rungs.stress import mixed_slack
torch.set_num_threads(1)
m, n = 64, 1 << 19  # 32 M float32 elements, 128 MiB a tensor
inputs = Inputs(load_problem(Path(sys.argv[1])), RunOptions(device="cpu", secret=5), "cpu")
made = inputs.make(0, 0, shape={"m": m, "n": n}, kind="mixed")
reference = inputs.reference(made)
peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
before = peak()
[slack] = mixed_slack(inputs, made, reference)
assert slack.shape == reference.shape and slack.dtype == torch.float32
print((peak() - before) / reference.nbytes)
"""


def test_the_mixed_slack_needs_a_few_outputs_of_memory_not_float64_copies(
    tmp_path: Path,
) -> None:
    """At an upstream size the slack and its float64 temporaries outgrew an 80 GB card:
    the perturbed inputs' copy, the reference on them and a float32 slack are what is
    held, the float64 differences and the signs go a chunk at a time."""
    script = tmp_path / "slack_memory.py"
    script.write_text(_SLACK_MEMORY)
    out = subprocess.run(
        [sys.executable, str(script), str(REPO / "examples" / "softmax")],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    grown = float(out.stdout.split()[-1])
    assert grown < 5.0, f"mixed_slack's peak grew by {grown:.1f} outputs"


def test_the_stress_trial_keeps_the_plain_reference_as_one_number(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rescaled trial's ``atol`` ratio needs only the plain reference's RMS: it is taken
    before the call, so that after it nothing is made again (the plain inputs and their
    reference were two more tensors of an upstream size beside the stress call's, and an
    H100 ran out of memory on KernelBench's L2Norm there); the ratio is the same one."""
    from harness.rungs.stress import STRESS_TRIAL, make_stress, stress_ratio

    problem = load_problem(REPO / "examples" / "softmax")
    inputs = Inputs(
        problem, RunOptions(device="cpu", secret=4, shapes=[{"m": 33, "n": 257}]), "cpu"
    )
    made = make_stress(inputs)
    assert made is not None and made.plain_rms is not None
    stressed = inputs.reference(made)
    plain = inputs.reference(inputs.make(made.shape_index, STRESS_TRIAL, record=False))
    want = float(stressed.double().pow(2).mean().sqrt()) / float(
        plain.double().pow(2).mean().sqrt()
    )

    def nothing_more(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("made again after the stress call")

    monkeypatch.setattr(problem, "generate_input", nothing_more)
    monkeypatch.setattr(problem, "ref_output", nothing_more)
    assert stress_ratio(made, stressed) == pytest.approx(want, rel=1e-9)
    assert want != pytest.approx(1.0)  # softmax's outputs do move when its inputs are rescaled


def test_the_slack_is_rounded_up_into_float32_and_stays_finite() -> None:
    """The float32 slack never sits below twice the float64 move (rounded up, not to
    nearest), and a move past float32's range keeps the largest finite slack: an inf
    one reads as no slack where the output is compared."""
    from harness.rungs.stress import _widen_slack

    a = torch.tensor([0.0, 1.0, -3e38, 5.0], dtype=torch.float32)
    b = torch.tensor([1e-3, 1.0 + 2**-20, 3e38, float("nan")], dtype=torch.float32)
    slack = torch.zeros(4, dtype=torch.float32)
    _widen_slack(slack, a, b)
    want = 2 * (b.double() - a.double()).abs()
    assert bool((slack[:2].double() >= want[:2]).all())
    assert slack[2] == torch.finfo(torch.float32).max and bool(torch.isfinite(slack[2]))
    again = slack.clone()
    _widen_slack(again, a, a)  # a smaller move keeps the larger slack
    assert torch.equal(again[:3], slack[:3])
