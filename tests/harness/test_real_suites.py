"""The real suites, tested without a worker: KernelBench sizes fitted to the device and
derived globals, GPU MODE data (CUDA-only inputs on a CPU, the output tensors in the
data), the library rules, output freshness and the compile clock.

The planted cheats and honest counterparts that go through the whole ladder are in
``cheats/`` (``test_harness_cheats.py``); the H200 side is ``bench/gpu/gpu_suites.py``.
"""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest
import torch
from cheatspec import FIXTURES
from conftest import worker_context

from harness.errors import ProblemError
from harness.options import RunOptions
from harness.problems.library import expand_allowed, is_compute, op_stem
from harness.problems.library_share import kernel_function, measure_cpu, measure_gpu
from harness.problems.problem import load_problem
from harness.rungs.inputs import Inputs
from harness.worker.freshness import OutputHistory, fresh_slots
from harness.worker.jitclock import CompileClock

KB_RELU = dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, x):
            return torch.relu(x)


    batch_size = 4096
    dim = 393216


    def get_inputs():
        return [torch.rand(batch_size, dim)]


    def get_init_inputs():
        return []
""")

KB_DERIVED = dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def forward(self, x):
            return x * 2


    M = 64
    N = 2 * M
    height, width = M + 1, 3


    def get_inputs():
        return [torch.rand(M, N, width)]


    def get_init_inputs():
        return [N]
""")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "KernelBench" / "level1" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_kernelbench_upstream_sizes_are_scaled_to_the_device(tmp_path: Path) -> None:
    """Regression: an honest ReLU at 4096 x 393216 gave no verdict on a CPU."""
    problem = load_problem(_write(tmp_path, "19_ReLU.py", KB_RELU))
    cpu = problem.shapes_for("cpu")
    cuda = problem.shapes_for("cuda")
    size = lambda s: s.get("batch_size", 4096) * s.get("dim", 393216)  # noqa: E731
    assert len(cpu) == 2 and all(size(s) <= 1 << 15 for s in cpu), cpu
    assert cpu[0] != cpu[1]  # a dimension that varies: the unseen shapes derive from it
    assert all(size(s) <= 1 << 24 for s in cuda) and size(cuda[0]) > size(cpu[0])
    assert problem.bench_shapes == [{}]  # --bench (and --shapes bench): the upstream sizes
    note = problem.shape_note("cpu") if problem.shape_note else ""
    assert "batch_size=4096" in note and "--shapes" in note
    x = problem.generate_input(1, cpu[0], "cpu")[0]
    assert tuple(x.shape) == (cpu[0].get("batch_size", 4096), cpu[0]["dim"])


def test_kernelbench_shape_override_recomputes_derived_globals(tmp_path: Path) -> None:
    """Regression: ``--shapes M=8`` left ``N = 2 * M`` at its upstream value."""
    problem = load_problem(_write(tmp_path, "98_Derived.py", KB_DERIVED))
    x = problem.generate_input(1, {"M": 8}, "cpu")[0]
    assert tuple(x.shape) == (8, 16, 3)
    assert problem.init is not None and problem.init({"M": 8})[1] == (16,)
    # back to the upstream values for a shape that overrides nothing
    assert tuple(problem.generate_input(1, {}, "cpu")[0].shape) == (64, 128, 3)
    # a derived global set explicitly wins over its expression
    assert tuple(problem.generate_input(1, {"M": 8, "N": 5}, "cpu")[0].shape) == (8, 5, 3)
    with pytest.raises(ProblemError, match=r"no module-level K.*M, N"):
        problem.generate_input(1, {"K": 3}, "cpu")


KB_WHERE = dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return x + 1

    def get_inputs():
        # its length says where torch's factories drew it (a meta tensor has no values)
        default = torch.empty(0).device.type
        return [torch.rand(2 if default != "cpu" else 3)]

    def get_init_inputs():
        return []
""")


@pytest.mark.parametrize("device", ["meta", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_kernelbench_inputs_are_drawn_on_the_device(tmp_path: Path, device: str) -> None:
    """Upstream's ``torch.rand`` on the CPU, then a copy, was 82 s of a 6.4 GB input's
    check on an H100: ``get_inputs`` runs with the device as torch's default."""
    problem = load_problem(_write(tmp_path, "97_Where.py", KB_WHERE))
    (x,) = problem.generate_input(1, {}, device)
    assert x.device.type == device and tuple(x.shape) == (2,)
    (on_cpu,) = problem.generate_input(1, {}, "cpu")
    assert on_cpu.device.type == "cpu" and tuple(on_cpu.shape) == (3,)
    if device == "cuda":  # the same seed, the same inputs; the caller's RNG untouched
        state = torch.cuda.get_rng_state()
        assert torch.equal(x, problem.generate_input(1, {}, device)[0])
        assert torch.equal(state, torch.cuda.get_rng_state())


def test_gpumode_cuda_only_inputs_are_built_on_a_cpu() -> None:
    """Regression: every GPU MODE problem builds on CUDA, so a CPU gave no verdict."""
    problem = load_problem(FIXTURES / "gpumode_axpy")
    x, y, out = problem.generate_input(7, {"size": 100}, "cpu")
    assert x.device.type == y.device.type == out.device.type == "cpu"
    again = problem.generate_input(7, {"size": 100}, "cpu")[0]
    assert torch.equal(x, again)  # the CPU generator is seeded like the CUDA one was
    assert not torch.cuda.is_available() or torch.Generator is not None


@pytest.mark.parametrize(("name", "slots"), [("gpumode_axpy", (2,)), ("gpumode_mean64", (1,))])
def test_gpumode_output_tensors_of_the_data_are_found(name: str, slots: tuple[int, ...]) -> None:
    problem = load_problem(FIXTURES / name)
    inputs = Inputs(problem, RunOptions(device="cpu", secret=5), "cpu")
    facts = inputs.study()
    assert facts.slots == slots
    assert facts.ops  # the reference's compute ops were recorded
    assert all(is_compute(op) for op in facts.ops)


def test_the_reference_ops_are_recorded_for_elementwise_problems() -> None:
    """Regression: the importer forbade only heavy ops, so ``return a + b`` passed."""
    problem = load_problem(FIXTURES / "gpumode_axpy")
    inputs = Inputs(problem, RunOptions(device="cpu", secret=5), "cpu")
    assert {"aten::mul", "aten::add"} <= set(inputs.study().ops)


def test_the_library_share_call_weighs_the_inputs_not_the_shape_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: ``{"size": n}`` is an n x n
    matrix, so the product of the keys (n) let a 16384 x 16384 add be the share call's
    shape: 1.5 GB of inputs through the worker's pipe, 11 s of anti-cheat on an H200.
    Here at a 1 MiB cap: a 1024 x 1024 pair (4 MiB) is too heavy, 256 x 256 is not."""
    from harness.rungs import inputs as inputs_module

    monkeypatch.setattr(inputs_module, "SHARE_MAX_BYTES", 1 << 20)
    (tmp_path / "problem.py").write_text(
        dedent(
            """
            import torch
            SHAPES = [{"size": 64}]
            BENCH_SHAPES = [{"size": 1024}, {"size": 256}, {"size": 32}]

            def generate_input(seed, size, device="cpu"):
                gen = torch.Generator(device=device).manual_seed(seed)
                return tuple(torch.randn(size, size, generator=gen, device=device,
                                         dtype=torch.float16) for _ in range(2))

            def ref_kernel(inputs):
                return inputs[0] + inputs[1]
            """
        )
    )
    inputs = Inputs(load_problem(tmp_path), RunOptions(device="cpu", secret=5), "cpu")
    assert inputs.share_shape() == {"size": 256}


def test_the_unseen_shape_beyond_the_checked_ones_weighs_its_inputs_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the unseen
    shape a GPU check adds between the checked and the benchmark sizes was picked by the
    product of the keys too, so a ~16000 x 16000 add made the correctness rung 10-18 s.
    Here at a 1 MiB cap the extra shape is still derived, and never heavier than the cap."""
    from harness.rungs import inputs as inputs_module

    monkeypatch.setattr(inputs_module, "SHARE_MAX_BYTES", 1 << 20)
    (tmp_path / "problem.py").write_text(
        dedent(
            """
            import torch
            SHAPES = [{"size": 64}, {"size": 96}]
            BENCH_SHAPES = [{"size": 256}, {"size": 1024}, {"size": 4096}]

            def generate_input(seed, size, device="cpu"):  # on the CPU whatever it is told
                gen = torch.Generator().manual_seed(seed)
                return tuple(torch.randn(size, size, generator=gen, dtype=torch.float16)
                             for _ in range(2))

            def ref_kernel(inputs):
                return inputs[0] + inputs[1]
            """
        )
    )
    beyond = []
    for secret in range(6):
        # "cuda" is only the Inputs' word for where the check runs: the extra shape is GPU-only
        inputs = Inputs(load_problem(tmp_path), RunOptions(device="cuda", secret=secret), "cuda")
        shapes = inputs.unseen_shapes()
        assert all(inputs._input_bytes(s) <= 1 << 20 for s in shapes), shapes
        beyond += [s for s in shapes if s["size"] > 96]
    assert beyond  # the shape a gate above the public sizes cannot pass is still there


def test_library_names() -> None:
    assert op_stem("aten::_softmax") == "softmax" and op_stem("add_") == "add"
    assert not is_compute("aten::copy_") and is_compute("aten::addcmul")
    allowed, everything = expand_allowed(["add,aten::mul", "matmul"])
    assert {"aten::add", "aten::add_", "aten::mul", "aten::mm"} <= allowed and not everything
    assert expand_allowed(["all"])[1]
    assert kernel_function("void at::native::foo<float>(float*, int)") == "foo"


def test_library_share_on_a_cpu_counts_the_data_library_ops_read() -> None:
    decoy = measure_cpu({"input_elements": 2000, "aten_elements": {"aten::addcmul": 3000}})
    epilogue = measure_cpu({"input_elements": 2000, "aten_elements": {"aten::div": 1}})
    assert decoy is not None and decoy.own == 0.0 and decoy.library[0][0] == "aten::addcmul"
    assert epilogue is not None and epilogue.own > 0.99


def test_library_share_on_a_gpu_tells_own_kernels_from_library_ones() -> None:
    call = {
        "kernels": [["ampere_sgemm_128x64_nn", 90.0, 1], ["copy_kernel", 10.0, 1]],
        "own_kernels": ["copy_kernel"],
        "generated_kernels": [],
    }
    share = measure_gpu(call, "", exact=True)
    assert share is not None and share.own == pytest.approx(0.1)
    assert "ampere_sgemm_128x64_nn 90%" in share.describe()
    generated = dict(call, own_kernels=["triton_poi_fused_add_0"])
    generated["generated_kernels"] = ["triton_poi_fused_add_0"]
    generated["kernels"] = [["triton_poi_fused_add_0", 5.0, 1]]
    inductor = measure_gpu(generated, "", exact=True)
    assert inductor is not None and inductor.own == 0.0  # compiled PyTorch is library


def test_output_history_catches_views_and_as_strided_into_earlier_outputs() -> None:
    history = OutputHistory()
    buffer = torch.zeros(256)
    first = history.next_call()
    out1 = buffer[64:128]
    history.add(first, out1, out1.clone())
    second = history.next_call()
    assert history.shares_earlier(torch.as_strided(buffer, (8,), (1,), 0), second) == [first]
    assert history.shares_earlier(buffer[128:], second) == [first]  # same storage, any offset
    assert history.shares_earlier(torch.zeros(4), second) == []
    buffer[70] = 1.0  # a later call overwrote the first output
    assert history.changed(second) == [first]


def test_a_large_outputs_snapshot_is_a_fingerprint_that_still_sees_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past the size bound the history keeps no copy of an output (a copy of an upstream
    sized output was one more on the GPU between calls), yet an earlier output changed
    anywhere, by a new value or two values swapped, is still reported."""
    import harness.worker.freshness as freshness

    monkeypatch.setattr(freshness, "SNAPSHOT_WHOLE_BYTES", 64)
    monkeypatch.setattr(freshness, "FINGERPRINT_WORDS", 7)  # chunks, and a short last one
    for change in ("value", "swap", "signs", "none", "bytes"):
        history = OutputHistory()
        first = history.next_call()
        out = torch.arange(0, 301, dtype=torch.float32)
        if change == "bytes":  # an odd byte count: summed a byte at a time
            out = torch.arange(0, 301, dtype=torch.uint8)
        if change == "signs":  # 64-bit words
            out = torch.arange(0, 301, dtype=torch.float64)
        history.add(first, out, out.clone())
        assert not any(isinstance(k.snapshot, torch.Tensor) for k in history.kept)
        second = history.next_call()
        if change == "value":
            out[250] += 1
        elif change == "swap":
            out[[10, 290]] = out[[290, 10]]
        elif change == "signs":  # two top bits, two places apart: cancels in unmixed sums
            out[11], out[13] = -out[11], -out[13]
        elif change == "bytes":
            out[3] = 200
        assert history.changed(second) == ([] if change == "none" else [first]), change


def test_fresh_slots_are_new_and_poisoned_each_call() -> None:
    data = (torch.ones(4), torch.zeros(3), torch.zeros(3, dtype=torch.int32))
    fresh, made = fresh_slots(data, {1, 2})
    assert fresh[0] is data[0] and len(made) == 2
    assert fresh[1].data_ptr() != data[1].data_ptr() and bool(torch.isnan(fresh[1]).all())
    assert bool((fresh[2] == -1).all())
    again, _ = fresh_slots(data, {1})
    assert again[1].data_ptr() != fresh[1].data_ptr() or fresh[1] is not again[1]


def test_compile_clock_pauses_the_run_budget() -> None:
    clock = CompileClock(budget_s=100.0)
    deadline = 10.0 + 30.0  # a 30 s run budget from t=10
    during = clock.start(deadline, now=15.0)
    assert during >= 15.0 + 100.0  # compiling: the compile budget applies
    after = clock.end(during, now=75.0)
    assert after == pytest.approx(75.0 + 25.0)  # the 25 s of run time left when it began
    again = clock.start(after, now=80.0)
    assert again == pytest.approx(max(after, 80.0 + 40.0))  # 60 s of the budget used


KB_ADD = dedent("""
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        def forward(self, a, b):
            return a + b


    n = 3000


    def get_inputs():
        return [torch.randn(n), torch.randn(n)]


    def get_init_inputs():
        return []
""")

KB_ADD_PASSTHROUGH = dedent("""
    import torch.nn as nn
    import triton  # noqa: F401  (looks like a Triton candidate)


    class ModelNew(nn.Module):
        def forward(self, a, b):
            return a + b
""")


def test_kernelbench_elementwise_passthrough_is_caught(tmp_path: Path) -> None:
    """Regression: a KernelBench ``ModelNew`` returning ``a + b`` passed (the
    importer forbade only heavy ops); now the reference's recorded ops are forbidden."""
    from harness.runner import LocalRunner, check

    problem = _write(tmp_path, "97_Add.py", KB_ADD)
    candidate = tmp_path / "model_new.py"
    candidate.write_text(KB_ADD_PASSTHROUGH)
    options = RunOptions(device="cpu", trials=1, burst=2, record=False, policy_scan=False)
    verdict = check(problem, candidate, options, runner=LocalRunner())
    failed = verdict.failed_rung
    assert failed is not None and failed.name == "anti-cheat", verdict.lines()
    assert "aten::add" in failed.reason and "which the reference computes" in failed.reason


def test_a_thread_is_known_by_the_code_it_will_run() -> None:
    """The guard lets PyTorch's compile machinery start threads, never ones that run the
    candidate's code (a torch helper handed a candidate callable)."""
    import functools
    import threading

    from harness.worker.guards import thread_target_file

    def work() -> None:
        pass

    thread = threading.Thread(target=work)
    assert thread_target_file(thread._bootstrap) == __file__  # what _thread is handed
    assert thread_target_file(functools.partial(work)) == __file__
    assert thread_target_file(work) == __file__
    assert thread_target_file(None) == ""


@pytest.mark.gpu
def test_the_worker_gives_its_cached_memory_back_before_it_replies(tmp_path: Path) -> None:
    """A call's freed blocks leave the worker before its reply does: the parent goes on at
    once (references, comparisons), and at KernelBench's upstream L2Norm the worker's
    cache, given back only after the reply, held 40 of an H100's 80 GB when the parent ran
    out of memory. The candidate frees a 2 GiB scratch buffer in every call."""
    from harness.problems.candidate import load_candidate

    examples = Path(__file__).resolve().parents[2] / "examples" / "vector_add"
    source = (examples / "solution_triton.py").read_text()
    marker = "    out = torch.empty_like(x)\n"
    scratch = "    torch.empty(1 << 31, dtype=torch.uint8, device=x.device).fill_(1)\n"
    path = tmp_path / "scratch_add.py"
    path.write_text(source.replace(marker, scratch + marker))
    problem = load_problem(examples)
    candidate = load_candidate(path, problem)
    options = RunOptions(device="cuda", shapes=[{"n": 4096}], record=False, policy_scan=False)
    ctx = worker_context(problem, candidate, options, "cuda", tmp_path)
    try:
        assert not ctx.workers.load().get("error")
        for trial in range(2):
            made = ctx.inputs.make(0, trial)
            torch.cuda.synchronize()
            free_before = torch.cuda.mem_get_info()[0]
            record = ctx.workers.call(made)
            free_after = torch.cuda.mem_get_info()[0]  # as the parent goes on
            assert record.gone is None and record.error is None, record.error
            assert free_before - free_after < 1 << 30, (trial, free_before, free_after)
    finally:
        ctx.close()
