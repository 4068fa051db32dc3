"""KernelBench problems: ``Model``, ``get_inputs()``, ``get_init_inputs()``; candidates ``ModelNew``.

How KernelBench itself evaluates (``src/kernelbench/eval.py``): reference and candidate
run in one process, both built after ``torch.manual_seed(seed)`` so their parameters
match, fed the same input objects, compared with ``torch.allclose`` at atol = rtol = 1e-4
for fp32 (1e-2 for fp16/bf16) on a few trials whose seeds derive from a public seed.
What it misses: the reference output lives in the candidate's process, the candidate
sees the very tensors the reference used, and nothing stops a ``ModelNew`` from calling
the library op.

Here: the parent builds ``Model`` and the worker builds ``ModelNew`` from the same
``get_init_inputs()`` and init seed (so parameters match), inputs come from
``get_inputs()`` under secret-mixed seeds, KernelBench's tolerance is kept, and the heavy
library ops the reference calls (matmul, softmax, norms, convolutions) are forbidden.
Module-level sizes (``batch_size``, ``N``, ...) can be overridden as shape keys.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import torch

from ..errors import ProblemError
from ..policy import GROUPS, MODULES, canonical_name
from ..problemspec import Problem, import_file, isolated_import_path, to_device

INIT_SEED = 42
_CONV_CALLS = {
    "torch.nn.Conv1d",
    "torch.nn.Conv2d",
    "torch.nn.Conv3d",
    "torch.nn.ConvTranspose1d",
    "torch.nn.ConvTranspose2d",
    "torch.nn.ConvTranspose3d",
    "torch.nn.functional.conv1d",
    "torch.nn.functional.conv2d",
    "torch.nn.functional.conv3d",
    "torch.conv2d",
}


def reference_ops(source: str) -> list[str]:
    """FORBIDDEN entries for the library ops a KernelBench ``Model`` calls (static)."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    found: list[str] = []

    def dotted(expr: ast.expr) -> str | None:
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if isinstance(expr, ast.Name):
            base = aliases.get(expr.id, expr.id)
            return ".".join([base, *reversed(parts)])
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for inner in ast.walk(node):
                if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.MatMult):
                    found.append("matmul")
                name = dotted(inner.func) if isinstance(inner, ast.Call) else None
                if name is None:
                    continue
                name = canonical_name(name)
                for group_name, group in GROUPS.items():
                    if group_name != "add" and name in group.calls:
                        found.append(group_name)
                if name in MODULES:
                    found.append(MODULES[name])
                if name in _CONV_CALLS:
                    found.extend(
                        [
                            "aten::convolution",
                            "aten::_convolution",
                            "aten::conv2d",
                            "aten::conv1d",
                            "aten::conv3d",
                        ]
                    )
    return sorted(set(found))


def load_kernelbench(file: Path) -> Problem:
    with isolated_import_path([file.parent], ()):
        module = import_file(file, "kernelbench")
    for required in ("Model", "get_inputs"):
        if not hasattr(module, required):
            raise ProblemError(f"{file}: a KernelBench problem defines {required}")
    get_init_inputs: Any = getattr(module, "get_init_inputs", lambda: [])
    models: dict[str, Any] = {}

    def apply_shape(shape: dict[str, Any]) -> None:
        for key, value in shape.items():
            if not hasattr(module, key):
                raise ProblemError(
                    f"{file}: no module-level {key} to set (shape keys override module globals)"
                )
            setattr(module, key, value)

    def init(shape: dict[str, Any]) -> tuple[int, tuple[Any, ...]]:
        apply_shape(shape)
        return INIT_SEED, tuple(get_init_inputs())

    def generate(seed: int, shape: dict[str, Any], device: str) -> Any:
        apply_shape(shape)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            inputs = tuple(module.get_inputs())
        return to_device(inputs, device)

    def reference(inputs: Any, shape: dict[str, Any]) -> Any:
        seed, args = init(shape)
        device = next(
            (t.device for t in inputs if isinstance(t, torch.Tensor)), torch.device("cpu")
        )
        key = repr((args, str(device)))
        model = models.get(key)
        if model is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                model = module.Model(*args)
            model = model.to(device)
            models.clear()
            models[key] = model
        with torch.no_grad():
            return model(*inputs)

    return Problem(
        name=file.stem,
        path=file,
        format="kernelbench",
        shapes=[{}],
        generate=generate,
        reference=reference,
        entry="ModelNew",
        entry_kind="model",
        forbidden=reference_ops(file.read_text()),
        tolerance={
            "float32": {"atol": 1e-4, "rtol": 1e-4},
            "float16": {"atol": 1e-2, "rtol": 1e-2},
            "bfloat16": {"atol": 1e-2, "rtol": 1e-2},
        },
        init=init,
        description=(module.Model.__doc__ or "").strip(),
    )
