"""Calibrated tolerances beside the declared ones, for ten problems.

``python3 bench/harness/calibrated_tolerances.py [--seeds 16] [PROBLEM ...]`` loads the example
problems (``examples/``) and six small ones written here into a temp folder (a float32
row sum, row mean, matmul, layer norm and cumulative sum, and a float16 matmul), or the
problems given (e.g. upstream KernelBench mirrors), and prints a markdown table: per
problem, shape (its last, the largest) and output tensor, the declared atol/rtol (the dtype's default or
``TOLERANCE``), the reference's p99 error against its float64 self and the calibrated
atol/rtol (``harness/problems/calibrate.py``: 4 x p99, never looser than declared). CPU,
seconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.problems.calibrate import measure
from harness.problems.problem import load_problem
from harness.rungs.inputs import flatten, shape_label

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

_HEAD = """import torch

SHAPES = {shapes}


def generate_input(seed, {args}, device="cpu"):
    gen = torch.Generator(device=device).manual_seed(seed)
    return {make}


def ref_kernel(inputs):
    {body}
"""
FRESH = {
    "row_sum_fp32": (
        [{"rows": 32, "n": 8192}],
        "rows, n",
        "(torch.randn(rows, n, generator=gen, device=device),)",
        "return inputs[0].sum(dim=1)",
    ),
    "row_mean_fp32": (
        [{"rows": 32, "n": 16384}],
        "rows, n",
        "(torch.randn(rows, n, generator=gen, device=device),)",
        "return inputs[0].mean(dim=1)",
    ),
    "matmul_fp32": (
        [{"n": 256}],
        "n",
        "(torch.randn(n, n, generator=gen, device=device), "
        "torch.randn(n, n, generator=gen, device=device))",
        "return inputs[0] @ inputs[1]",
    ),
    "layernorm_fp32": (
        [{"rows": 64, "n": 1024}],
        "rows, n",
        "(torch.randn(rows, n, generator=gen, device=device),)",
        "return torch.nn.functional.layer_norm(inputs[0], inputs[0].shape[-1:])",
    ),
    "cumsum_fp32": (
        [{"n": 65536}],
        "n",
        "(torch.randn(n, generator=gen, device=device),)",
        "return inputs[0].cumsum(0)",
    ),
    "matmul_fp16": (
        [{"n": 256}],
        "n",
        "(torch.randn(n, n, generator=gen, device=device).half(), "
        "torch.randn(n, n, generator=gen, device=device).half())",
        "return inputs[0] @ inputs[1]",
    ),
}


def write_fresh(root: Path) -> list[Path]:
    out = []
    for name, (shapes, args, make, body) in FRESH.items():
        folder = root / name
        folder.mkdir()
        text = _HEAD.format(shapes=shapes, args=args, make=make, body=body)
        (folder / "problem.py").write_text(f'"""{name}"""\n\n' + text)
        out.append(folder)
    return out


def rows(path: Path, seeds: int) -> list[str]:
    problem = load_problem(path)
    out = []
    shape = problem.shapes_for("cpu")[-1]  # the largest, by the examples' convention
    inputs = [problem.generate_input(6000 + k, shape, "cpu") for k in range(seeds)]
    calibration = measure(problem, shape, shape_label(shape), inputs)
    reference = problem.ref_output(inputs[0], shape)
    tensors = [t for t in flatten(reference) if isinstance(t, torch.Tensor)]
    for index, tensor in enumerate(tensors):
        declared = problem.tolerance_for(tensor.dtype)
        found = calibration.for_output(index)
        head = f"| {problem.name} | {shape_label(shape)} | {index} ({str(tensor.dtype)[6:]}) "
        head += f"| {declared.atol:.1e} / {declared.rtol:.1e} "
        if found is None:
            why = (calibration.skipped or "not floating point").split(" on ")[0]
            out.append(head + f"| - | - ({why}) |")
            continue
        used = found.applied(declared)
        out.append(
            head + f"| {found.p99_abs:.1e} / {found.p99_rel:.1e} "
            f"| {used.atol:.1e} / {used.rtol:.1e} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="*", type=Path)
    parser.add_argument("--seeds", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        problems = args.problems or [
            *sorted(p for p in EXAMPLES.iterdir() if (p / "problem.py").is_file()),
            *write_fresh(Path(tmp)),
        ]
        print(
            "| problem | shape | output | declared atol / rtol | p99 abs / rel error "
            "vs float64 | calibrated atol / rtol |"
        )
        print("|---|---|---|---|---|---|")
        for path in problems:
            for line in rows(path, args.seeds):
                print(line)


if __name__ == "__main__":
    main()
