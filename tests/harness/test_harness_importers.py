"""Importers: small problems written here in the GPU MODE and KernelBench formats.

The layouts follow the real suites (gpu-mode/reference-kernels ``problems/pmpp/*``:
``reference.py`` + ``task.py`` + ``task.yml``, ``utils.py`` one level up; KernelBench
``level1/*.py``: ``Model``, module-level sizes, ``get_inputs``, ``get_init_inputs``). Their
reference generators target CUDA; these pick CPU when no GPU is present.
"""

from __future__ import annotations

import sys
from pathlib import Path
from textwrap import dedent

import pytest

from harness.errors import UsageError
from harness.problems.importers.gpumode import parse_task_yml
from harness.problems.importers.kernelbench import reference_ops
from harness.problems.problem import detect_format, load_problem
from harness.runner import LocalRunner, RunOptions, check

TRITON_ADD = """
import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(c_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    c = torch.empty_like(a)
    add_kernel[(triton.cdiv(a.numel(), 256),)](a, b, c, a.numel(), BLOCK=256)
    return c
"""


def write_gpumode(root: Path) -> Path:
    """problems/pmpp/{utils.py, vectoradd_py/{reference.py, task.py, task.yml}}"""
    pmpp = root / "problems" / "pmpp"
    problem = pmpp / "vectoradd_py"
    problem.mkdir(parents=True)
    (pmpp / "utils.py").write_text(
        dedent("""
        import torch


        def make_match_reference(reference, rtol=1e-05, atol=1e-08):
            def check(data, output):
                expected = reference(data)
                if output.shape != expected.shape:
                    return "SIZE MISMATCH"
                bad = (output - expected).abs() > atol + rtol * expected.abs()
                return f"mismatch found! {int(bad.sum())} elements" if bool(bad.any()) else ""
            return check
    """)
    )
    (problem / "task.py").write_text(
        dedent("""
        from typing import TypedDict, TypeVar
        import torch

        input_t = TypeVar("input_t", bound=torch.Tensor)
        output_t = TypeVar("output_t", bound=torch.Tensor)


        class TestSpec(TypedDict):
            size: int
            seed: int
    """)
    )
    (problem / "reference.py").write_text(
        dedent("""
        from utils import make_match_reference
        import torch
        from task import input_t, output_t


        def ref_kernel(data: input_t) -> output_t:
            A, B = data
            return A + B


        def generate_input(size: int, seed: int) -> input_t:
            device = "cuda" if torch.cuda.is_available() else "cpu"
            gen = torch.Generator(device=device)
            gen.manual_seed(seed)
            A = torch.randn(size, size, device=device, dtype=torch.float16, generator=gen).contiguous()
            B = torch.randn(size, size, device=device, dtype=torch.float16, generator=gen).contiguous()
            return (A, B)


        check_implementation = make_match_reference(ref_kernel)
    """)
    )
    (problem / "task.yml").write_text(
        dedent("""
        # name: vectoradd-py

        files:
          - {"name": "submission.py", "source": "@SUBMISSION@"}
          - {"name": "task.py", "source": "task.py"}
          - {"name": "utils.py", "source": "../utils.py"}
          - {"name": "reference.py", "source": "reference.py"}
          - {"name": "eval.py", "source": "../eval.py"}

        lang: "py"

        description: |
          Implement a float16 vector addition kernel.

        tests:
          - {"size": 17, "seed": 4242}
          - {"size": 32, "seed": 5236}

        benchmarks:
          - {"size": 1024, "seed": 31232}
    """)
    )
    (problem / "submission.py").write_text(TRITON_ADD)
    return problem


def test_gpumode_task_yml_is_read(tmp_path: Path) -> None:
    problem = load_problem(write_gpumode(tmp_path))
    assert problem.format == "gpumode"
    assert problem.shapes == [{"size": 17}, {"size": 32}]
    assert problem.seeds == [4242, 5236]
    assert problem.bench_shapes == [{"size": 1024}]
    assert problem.check is not None
    assert sorted(p.name for p in problem.support_files) == ["task.py", "utils.py"]


def test_task_yml_without_pyyaml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    text = (write_gpumode(tmp_path) / "task.yml").read_text()
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml -> ImportError
    data = parse_task_yml(text)
    assert data["tests"] == [{"size": 17, "seed": 4242}, {"size": 32, "seed": 5236}]
    assert data["files"][2] == {"name": "utils.py", "source": "../utils.py"}


def test_gpumode_honest_submission_passes(tmp_path: Path) -> None:
    problem = write_gpumode(tmp_path)
    verdict = check(
        problem,
        problem / "submission.py",
        RunOptions(device="cpu", trials=2, burst=2, record=False),
        runner=LocalRunner(),
    )
    assert verdict.ok, verdict.feedback()
    assert verdict.problem_format == "gpumode"
    assert verdict.seeds["public"] == [4242, 5236]


def test_gpumode_input_mutation_is_caught(tmp_path: Path) -> None:
    """GPU MODE's own eval checks on the data the candidate received: zeroing the inputs
    and returning zeros would agree with a reference computed afterwards. Not here."""
    problem = write_gpumode(tmp_path)
    cheat = problem / "zeroing.py"
    cheat.write_text(
        dedent("""
        import torch


        def custom_kernel(data):
            a, b = data
            a.zero_()
            b.zero_()
            return torch.zeros_like(a)
    """)
    )
    verdict = check(problem, cheat, RunOptions(device="cpu", trials=1, burst=2, record=False))
    assert not verdict.ok
    assert verdict.failed_rung is not None and verdict.failed_rung.name == "correctness"
    assert "check_implementation: mismatch found!" in verdict.failed_rung.reason
    assert "modified its input #0" in verdict.failed_rung.reason


def test_gpumode_reference_import_is_refused(tmp_path: Path) -> None:
    problem = write_gpumode(tmp_path)
    cheat = problem / "uses_reference.py"
    cheat.write_text(
        "from reference import ref_kernel\n\n\ndef custom_kernel(data):\n    return ref_kernel(data)\n"
    )
    verdict = check(problem, cheat, RunOptions(device="cpu", record=False))
    assert verdict.failed_rung is not None and verdict.failed_rung.name == "pre-checks"
    assert "reference" in verdict.failed_rung.reason


KB_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer followed by ReLU."""

    def __init__(self, in_features: int, out_features: int):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


batch_size = 16
in_features = 40
out_features = 24


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]
'''

KB_TRITON = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
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
    acc = tl.maximum(acc, 0.0)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # holds the same parameters

    def forward(self, x):
        m, k = x.shape
        n = self.linear.weight.shape[0]
        y = torch.empty((m, n), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(m, 16), triton.cdiv(n, 16))
        linear_relu[grid](x, self.linear.weight, self.linear.bias, y, m, n, k, BM=16, BN=16, BK=16)
        return y
"""


def write_kernelbench(root: Path) -> Path:
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True)
    path = level / "99_Linear_ReLU.py"
    path.write_text(KB_PROBLEM)
    return path


def test_kernelbench_is_detected_and_forbids_the_reference_ops(tmp_path: Path) -> None:
    path = write_kernelbench(tmp_path)
    assert detect_format(path) == ("kernelbench", path)
    problem = load_problem(path)
    assert problem.entry == "ModelNew" and problem.entry_kind == "model"
    assert problem.forbidden == ["matmul"]
    assert reference_ops(
        "import torch\nclass Model:\n    def forward(self, x):\n        return torch.softmax(x, 1)\n"
    ) == ["softmax"]


def test_kernelbench_honest_model_new_passes(tmp_path: Path) -> None:
    path = write_kernelbench(tmp_path)
    cand = tmp_path / "model_new.py"
    cand.write_text(KB_TRITON)
    options = RunOptions(
        device="cpu",
        trials=2,
        burst=2,
        record=False,
        shapes=[{"batch_size": 16}, {"batch_size": 5}],
    )
    verdict = check(path, cand, options, runner=LocalRunner())
    assert verdict.ok, verdict.feedback()
    assert verdict.seeds["shapes"] == ["batch_size=16", "batch_size=5"]


def test_kernelbench_model_new_calling_the_layer_is_caught(tmp_path: Path) -> None:
    path = write_kernelbench(tmp_path)
    cand = tmp_path / "lazy.py"
    cand.write_text(
        KB_TRITON.replace("        return y\n", "        return torch.relu(self.linear(x))\n")
    )
    verdict = check(path, cand, RunOptions(device="cpu", trials=1, burst=2, record=False))
    assert verdict.failed_rung is not None and verdict.failed_rung.name == "anti-cheat"
    assert "forbidden library op" in verdict.failed_rung.reason
    assert any("aten::addmm" in i or "linear" in i for i in verdict.integrity), verdict.integrity


def test_kernelbench_subclassing_the_reference_is_refused(tmp_path: Path) -> None:
    path = write_kernelbench(tmp_path)
    cand = tmp_path / "subclass.py"
    cand.write_text("from reference import Model\n\n\nclass ModelNew(Model):\n    pass\n")
    verdict = check(path, cand, RunOptions(device="cpu", record=False))
    assert verdict.failed_rung is not None and verdict.failed_rung.name == "pre-checks"
    messages = [f["message"] for f in verdict.failed_rung.details["findings"]]
    assert "ModelNew subclasses the reference Model" in messages


def test_detect_format_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not found"):
        detect_format(tmp_path / "missing.py")
    other = tmp_path / "other.py"
    other.write_text("x = 1\n")
    with pytest.raises(UsageError, match="unknown problem format"):
        detect_format(other)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=r"no problem\.py"):
        detect_format(empty)


def test_overlapping_cpu_checks_of_gpu_mode_problems_leave_torch_generator_the_class() -> None:
    """Two checks in two threads (a batch, the check server) each run a GPU MODE problem's
    input code under ``cuda_as_cpu``: the first to leave must not restore what the second
    saw on entry (the patch), nor the second put the first's patch back for good."""
    import threading

    import torch

    from harness.problems.importers.gpumode import cuda_as_cpu

    real = torch.Generator
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with cuda_as_cpu():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second() -> None:
        a_in.wait(10)
        with cuda_as_cpu():
            b_in.set()
            a_out.wait(10)
            assert torch.Generator(device="cuda").device.type == "cpu"  # still patched

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert torch.Generator is real
