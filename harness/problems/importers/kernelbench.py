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
Module-level sizes (``batch_size``, ``N``, ...) can be overridden as shape keys; the
module-level globals computed from an overridden one (``N = 2 * M``) are computed again
(``ModuleSizes``), and a key that is no module-level global is named in the error.
The same expressions tie sizes together in the unseen shapes (``ModuleSizes.links``):
with ``--shapes out_features=24,bias_shape=24`` and upstream ``bias_shape =
(out_features,)``, a derived shape that changes ``out_features`` recomputes
``bias_shape`` instead of varying it on its own (which made an honest fused GEMM + bias
kernel "wrong" on a bias that no longer matched its output); a size whose relation to the
others cannot be seen (a shape written as a literal, or computed from a size the shape
does not set) stays as given, and the verdict names it.

Upstream sizes are chosen for a large GPU (a ReLU of 4096 x 393216 floats): a check uses
them only for ``--bench`` on a GPU. By default a check runs on sizes scaled to the device
(``device_shapes``: the largest module-level sizes halved until the inputs and parameters
fit ``ELEMENT_BUDGET`` for that device, measured on the meta device, plus a second shape
a little smaller so that the unseen shapes have a dimension to vary); the verdict names
the shapes it used.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import torch

from ...errors import ProblemError
from ..policy import GROUPS, MODULES, canonical_name
from ..problemspec import Problem, import_file, isolated_import_path, to_device
from ..pysource import parse as parse_source
from ..unseen import SizeLinks, UnseenPolicy

INIT_SEED = 42
# elements (inputs + parameters) a default check shape may hold, per device
ELEMENT_BUDGET = {"cpu": 1 << 15, "cuda": 1 << 24}
MIN_SCALED = 16  # sizes below this are never halved
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
    tree = parse_source(source)
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


def _assignments(node: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, expression) of a top-level ``x = ...``, ``x: int = ...`` or ``a, b = 1, 2``."""
    target: ast.expr
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    elif isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    else:
        return []
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (
        isinstance(target, ast.Tuple)
        and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
        and all(isinstance(t, ast.Name) for t in target.elts)
    ):
        return [(t.id, v) for t, v in zip(target.elts, value.elts, strict=True)]  # type: ignore[attr-defined]
    return []


class ModuleSizes:
    """A KernelBench module's top-level assignments, replayed for a shape: every global is
    reset to its upstream value, the shape's keys are set, and each later assignment whose
    expression reads a changed name is evaluated again (``N = 2 * M``)."""

    def __init__(self, file: Path, module: Any, source: str) -> None:
        self.file = file
        self.module = module
        self.steps: list[tuple[str, Any, set[str]]] = []  # (name, compiled expr, names read)
        self.original: dict[str, Any] = {}
        for node in parse_source(source).body:
            for name, value in _assignments(node):
                if not hasattr(module, name):
                    continue
                reads = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
                code = compile(ast.Expression(value), str(file), "eval")
                self.steps.append((name, code, reads))
                self.original[name] = getattr(module, name)

    def sizes(self) -> dict[str, int]:
        """The upstream integer globals (the sizes a shape may override)."""
        return {
            k: v for k, v in self.original.items() if isinstance(v, int) and not isinstance(v, bool)
        }

    def _reads(self, name: str) -> set[str]:
        """The globals ``name``'s expression reads, directly or through other globals."""
        direct = {n: reads for n, _, reads in self.steps}
        out: set[str] = set()
        todo = list(direct.get(name, set()))
        while todo:
            read = todo.pop()
            if read in out or read == name or read not in self.original:
                continue
            out.add(read)
            todo.extend(direct.get(read, set()))
        return out

    def computed(self, shape: dict[str, Any], names: set[str]) -> dict[str, Any]:
        """What the module computes for ``names`` when the rest of ``shape`` is set."""
        try:
            self.apply({k: v for k, v in shape.items() if k not in names})
            namespace = vars(self.module)
            return {n: namespace[n] for n in names}
        finally:
            self.apply({})

    def links(self, shapes: list[dict[str, Any]]) -> SizeLinks:
        """Which keys of ``shapes`` belong together (see the module docstring)."""
        keys = [k for k in dict.fromkeys(k for s in shapes for k in s) if k in self.original]
        follows: dict[str, tuple[str, ...]] = {}
        held: dict[str, str] = {}
        for key in keys:
            reads = self._reads(key)
            sources = tuple(sorted(reads & set(keys) - {key}))
            if sources:
                given = [s[key] for s in shapes if key in s]
                try:
                    want = [self.computed(s, {key})[key] for s in shapes if key in s]
                except ProblemError:
                    want = []
                if want and all(_same_size(g, w) for g, w in zip(given, want, strict=True)):
                    follows[key] = sources
                else:
                    held[key] = (
                        f"set to {given[0]!r}, not to what the problem computes from "
                        f"{', '.join(sources)}"
                    )
            elif reads:
                held[key] = (
                    f"computed from {', '.join(sorted(reads))}, which the shape does not set"
                )
            elif isinstance(self.original[key], (tuple, list)):
                held[key] = (
                    "a shape written as a literal: how it relates to the other sizes is not written down"
                )
        # a held shape that repeats another size (bias_shape = (8192,) beside out_features =
        # 8192, set to 24 and 24) most likely is that size: varying it alone would break them
        for key in list(held):
            for other in keys:
                if other in held or other in follows or other == key:
                    continue
                if all(
                    _is_size(s.get(other)) and s[other] in _as_sizes(s.get(key))
                    for s in shapes
                    if key in s
                ):
                    held[other] = f"the same size as {key}, which stays as given"
        return SizeLinks(follows=follows, held=held, recompute=self._recompute(follows))

    def _recompute(self, follows: dict[str, tuple[str, ...]]) -> Any:
        if not follows:
            return None

        def recompute(shape: dict[str, Any]) -> dict[str, Any]:
            out = dict(shape)
            try:
                values = self.computed(shape, set(follows) & set(shape))
            except ProblemError:
                return out  # the shape is then refused by the problem's own generator
            out.update({k: _like(shape[k], v) for k, v in values.items()})
            return out

        return recompute

    def apply(self, shape: dict[str, Any]) -> list[str]:
        """Set the module's globals for ``shape``; the globals recomputed from it."""
        unknown = [k for k in shape if k not in self.original and not hasattr(self.module, k)]
        if unknown:
            raise ProblemError(
                f"{self.file}: no module-level {unknown[0]} to set (shape keys override "
                f"module globals: {', '.join(sorted(self.sizes())) or 'none'})"
            )
        namespace = vars(self.module)
        namespace.update(self.original)
        changed = {k for k, v in shape.items() if self.original.get(k, object()) != v}
        for key, value in shape.items():
            namespace[key] = value
        derived = []
        for name, code, reads in self.steps:
            if name in shape or not (reads & changed):
                continue
            try:
                namespace[name] = eval(code, namespace)  # the problem's own expression
            except Exception as exc:
                raise ProblemError(
                    f"{self.file}: {name} is computed from {', '.join(sorted(reads & changed))}"
                    f" and cannot be computed again for this shape ({exc}); set {name} too"
                ) from None
            changed.add(name)
            derived.append(name)
        return derived


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_sizes(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return value


def _same_size(given: Any, computed: Any) -> bool:
    """``24`` and ``(24,)`` are the same size (``torch.randn`` takes either)."""
    return bool(_as_sizes(given) == _as_sizes(computed))


def _like(given: Any, value: Any) -> Any:
    """``value`` written the way the shape wrote the size it replaces (an int for a
    one-element tuple when the shape gave an int)."""
    if (
        isinstance(given, int)
        and isinstance(value, (tuple, list))
        and len(value) == 1
        and isinstance(value[0], int)
    ):
        return value[0]
    if isinstance(given, list) and isinstance(value, tuple):
        return list(value)
    return value


def _meta_elements(module: Any, sizes: ModuleSizes, shape: dict[str, Any]) -> int | None:
    """Elements of a shape's inputs and the model's parameters, on the meta device (no
    memory); None when the problem cannot be built there."""
    try:
        sizes.apply(shape)
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            inputs = list(module.get_inputs())
            init: list[Any] = list(getattr(module, "get_init_inputs", lambda: [])())
            model = module.Model(*init)
        total = sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))
        return total + sum(p.numel() for p in model.parameters())
    except Exception:  # the problem's own code may raise anything on the meta device
        return None
    finally:
        sizes.apply({})


def scaled_shapes(module: Any, sizes: ModuleSizes, budget: int) -> list[dict[str, Any]]:
    """Shapes that fit ``budget`` elements: the largest sizes halved until they do (and a
    second shape with the largest remaining size smaller still); [] when the upstream
    sizes fit already or the problem cannot be measured."""
    upstream = sizes.sizes()
    if not upstream:
        return []
    first = _meta_elements(module, sizes, {})
    if first is None or first <= budget:
        return []
    shape = dict(upstream)
    for _ in range(64):
        big = max(shape, key=lambda k: shape[k])
        if shape[big] < MIN_SCALED:  # small sizes are structure (kernel sizes, strides)
            break
        shape[big] = max(1, shape[big] // 2)
        count = _meta_elements(module, sizes, shape)
        if count is None:
            return []
        if count <= budget:
            break
    keep = {k: v for k, v in shape.items() if v != upstream[k]}
    top = max(keep, key=lambda k: keep[k]) if keep else None
    shapes = [keep]
    if top is not None and keep[top] >= MIN_SCALED:
        second = dict(keep)
        second[top] = max(1, (keep[top] * 3) // 4)
        if _meta_elements(module, sizes, second) is not None:
            shapes.append(second)
    return shapes


def load_kernelbench(file: Path) -> Problem:
    with isolated_import_path([file.parent], ()):
        module = import_file(file, "kernelbench")
    for required in ("Model", "get_inputs"):
        if not hasattr(module, required):
            raise ProblemError(f"{file}: a KernelBench problem defines {required}")
    get_init_inputs: Any = getattr(module, "get_init_inputs", lambda: [])
    models: dict[str, Any] = {}
    sizes = ModuleSizes(file, module, file.read_text())
    scaled: dict[str, list[dict[str, Any]]] = {}

    def apply_shape(shape: dict[str, Any]) -> None:
        sizes.apply(shape)

    def device_shapes(device: str) -> list[dict[str, Any]]:
        kind = "cpu" if device == "cpu" else "cuda"
        if kind not in scaled:
            scaled[kind] = scaled_shapes(module, sizes, ELEMENT_BUDGET[kind]) or [{}]
        return scaled[kind]

    def shape_note(device: str) -> str:
        shapes = device_shapes(device)
        if shapes == [{}]:
            return ""
        upstream = sizes.sizes()
        changed = sorted({k for s in shapes for k in s})
        was = ", ".join(f"{k}={upstream[k]}" for k in changed)
        return (
            f"scaled down to fit the {device} (upstream {was}; --shapes bench for the "
            "upstream sizes, or --shapes KEY=VALUE)"
        )

    def init(shape: dict[str, Any]) -> tuple[int, tuple[Any, ...]]:
        apply_shape(shape)
        return INIT_SEED, tuple(get_init_inputs())

    def generate(seed: int, shape: dict[str, Any], device: str) -> Any:
        """``get_inputs()`` with ``device`` as torch's default device, so ``torch.rand``
        and the like draw there: upstream draws on the CPU and copies, which for a 6.4 GB
        input was 82 s of a check's 353 s on an H100. What it still builds on the CPU
        (from numpy, say) is moved after."""
        apply_shape(shape)
        where = torch.device(device)
        if where.type != "cpu":
            forked = [where.index or 0] if where.type == "cuda" else []
            try:
                with torch.random.fork_rng(devices=forked), where:
                    torch.manual_seed(seed)
                    return to_device(tuple(module.get_inputs()), device)
            except torch.OutOfMemoryError:  # its temporaries too on the card: as upstream
                torch.cuda.empty_cache()
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
        bench_shapes=[{}],
        device_shapes=device_shapes,
        shape_note=shape_note,
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
        unseen=UnseenPolicy(links=sizes.links),
    )
