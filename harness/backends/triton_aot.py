"""Ahead-of-time Triton compiles for a named target, with the JIT's own specialisation.

A helper of the Triton backend (``triton.py``); nothing else imports it.

``record_launch`` (called by the Triton backend's launch wrapper when
``CTXKERNEL_RECORD_LAUNCHES=1``) keeps a description of each distinct launch: the kernel
object, and per argument its dtype and pointer alignment (tensors) or value (scalars,
constexprs, options such as ``num_warps``). ``compile_launch`` rebuilds those arguments as
stand-ins and runs them through Triton's own binder (``create_function_from_signature``
then ``JITFunction._pack_args``) with the target's backend, so the signature, constexprs
and the ``tt.divisibility`` attributes are exactly what the JIT would derive at launch --
without them loads come out scalar -- then ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", 90, 32))``. No GPU or driver is needed; the kernel must live in a
real ``.py`` file. A version-tolerant fallback builds the signature by hand.

Under the Triton interpreter every ``@triton.jit`` helper (``tl.cdiv`` too) is an
interpreted function, which the code generator cannot call: so launches recorded in an
interpreter worker travel as JSON (``launches_to_json``) to a worker with the interpreter
off, which finds the same kernels by name and file and compiles them there.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

from .base import parse_target

MAX_RECORDED = 32


@dataclass
class TensorSpec:
    """Stands in for a tensor argument: what Triton's specialisation looks at."""

    dtype: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    ptr_mod: int  # data_ptr() % 256: divisibility by 16 is what specialisation keeps

    def data_ptr(self) -> int:
        return 4096 + self.ptr_mod

    def stride(self, dim: int | None = None) -> Any:
        return self.strides if dim is None else self.strides[dim]

    def dim(self) -> int:
        return len(self.shape)

    def ptr_range(self) -> int:
        return 0

    def element_size(self) -> int:
        return int(getattr(self.dtype, "itemsize", 4))

    def describe(self) -> str:
        return f"{str(self.dtype).replace('torch.', '')}{list(self.shape)}@{(self.ptr_mod % 16 == 0 and '16B') or 'unaligned'}"


@dataclass
class LaunchSpec:
    kernel: Any  # the JITFunction or InterpretedFunction object
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        def one(value: Any) -> str:
            return value.describe() if isinstance(value, TensorSpec) else repr(value)

        return {
            "kernel": self.name,
            "args": [one(a) for a in self.args],
            "kwargs": {k: one(v) for k, v in self.kwargs.items()},
        }


RECORDED: dict[tuple[Any, ...], LaunchSpec] = {}


def _spec(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return TensorSpec(
            value.dtype, tuple(value.shape), tuple(value.stride()), value.data_ptr() % 256
        )
    return value


def _key_part(value: Any) -> Any:
    if isinstance(value, TensorSpec):
        return ("t", str(value.dtype), value.ptr_mod % 16 == 0)
    if isinstance(value, bool) or value is None:
        return ("v", value)
    if isinstance(value, int):
        return ("i", value % 16 == 0, value == 1)
    return ("v", repr(value)[:200])


def record_launch(kernel: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Remember a launch's specialisation (once per distinct key; a few microseconds)."""
    if len(RECORDED) >= MAX_RECORDED:
        return
    specs = tuple(_spec(a) for a in args)
    kw = {k: _spec(v) for k, v in kwargs.items() if k not in ("grid", "warmup")}
    key = (
        id(kernel),
        tuple(_key_part(a) for a in specs),
        tuple(sorted((k, _key_part(v)) for k, v in kw.items())),
    )
    if key not in RECORDED:
        fn = getattr(kernel, "fn", kernel)
        RECORDED[key] = LaunchSpec(kernel, getattr(fn, "__name__", "kernel"), specs, kw)


def _jit_function(kernel: Any) -> Any:
    from triton.runtime.jit import JITFunction

    if isinstance(kernel, JITFunction):
        return kernel
    fn = getattr(kernel, "fn", None)
    if fn is None:
        raise TypeError(f"not a Triton kernel: {kernel!r}")
    kwargs = dict(getattr(kernel, "kwargs", {}) or {})
    return JITFunction(fn, **kwargs)


def compile_launch(spec: LaunchSpec, target: str) -> dict[str, Any]:
    """Compile one recorded launch for ``target``: {"asm": {...}, "metadata": {...}}."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler import compile as triton_compile

    backend_name, arch = parse_target(target)
    gpu_target = GPUTarget(backend_name, arch, 32)
    jit = _jit_function(spec.kernel)
    backend = make_backend(gpu_target)
    kwargs = dict(spec.kwargs)
    kwargs.setdefault("debug", False)
    method = "jit-binder"
    try:
        from triton.runtime.jit import create_function_from_signature

        binder = create_function_from_signature(jit.signature, jit.params, backend)
        bound, specialization, options = binder(*spec.args, **kwargs)
        options, signature, constexprs, attrs = jit._pack_args(
            backend, kwargs, bound, specialization, options
        )
        option_dict = options.__dict__
    except Exception:  # Triton's private binder changes by version: packed by hand then
        method = "manual"
        signature, constexprs, attrs, option_dict = _manual(jit, spec, backend, kwargs)
    src = ASTSource(jit, signature, constexprs, attrs)
    compiled = triton_compile(src, target=gpu_target, options=option_dict)
    meta = compiled.metadata
    metadata = {
        "name": getattr(meta, "name", spec.name),
        "target": f"sm_{arch}",
        "num_warps": getattr(meta, "num_warps", None),
        "num_stages": getattr(meta, "num_stages", None),
        "shared": getattr(meta, "shared", None),
        "signature": {str(k): str(v) for k, v in signature.items()},
        "constexprs": {str(k): repr(v) for k, v in constexprs.items()},
        "attrs": {str(k): v for k, v in attrs.items()},
        "specialisation": method,
        "launch": spec.describe(),
    }
    digest = hashlib.sha256(repr(sorted((str(k), str(v)) for k, v in signature.items())).encode())
    digest.update(repr(sorted((str(k), repr(v)) for k, v in constexprs.items())).encode())
    digest.update(repr(sorted((str(k), repr(v)) for k, v in attrs.items())).encode())
    digest.update(repr((metadata["num_warps"], metadata["num_stages"])).encode())
    metadata["version"] = digest.hexdigest()[:10]
    return {"asm": dict(compiled.asm), "metadata": metadata}


def _manual(
    jit: Any, spec: LaunchSpec, backend: Any, kwargs: dict[str, Any]
) -> tuple[dict[str, str], dict[tuple[int, ...], Any], dict[tuple[int, ...], Any], dict[str, Any]]:
    """The JIT's rules by hand: pointers and ints divisible by 16 get ``tt.divisibility``."""
    import inspect

    params = list(inspect.signature(jit.fn).parameters.values())
    bound: dict[str, Any] = {}
    for i, param in enumerate(params):
        if i < len(spec.args):
            bound[param.name] = spec.args[i]
        elif param.name in kwargs:
            bound[param.name] = kwargs[param.name]
        else:
            bound[param.name] = param.default
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], Any] = {}
    for i, param in enumerate(params):
        value = bound[param.name]
        annotation = str(param.annotation)
        if "constexpr" in annotation:
            signature[param.name] = "constexpr"
            constexprs[(i,)] = value
        elif isinstance(value, TensorSpec):
            signature[param.name] = "*" + _triton_dtype(value.dtype)
            attrs[(i,)] = [["tt.divisibility", 16]] if value.ptr_mod % 16 == 0 else []
        elif isinstance(value, bool):
            signature[param.name] = "i1"
        elif isinstance(value, int):
            if value == 1:
                signature[param.name] = "constexpr"
                constexprs[(i,)] = 1
            else:
                signature[param.name] = "i32" if -(2**31) <= value < 2**31 else "i64"
                attrs[(i,)] = [["tt.divisibility", 16]] if value % 16 == 0 else []
        elif isinstance(value, float):
            signature[param.name] = "fp32"
        else:
            signature[param.name] = "constexpr"
            constexprs[(i,)] = value
    options = backend.parse_options({k: v for k, v in kwargs.items() if k not in bound})
    return signature, constexprs, attrs, options.__dict__


def _triton_dtype(dtype: Any) -> str:
    name = str(dtype).replace("torch.", "")
    return {
        "float32": "fp32",
        "float16": "fp16",
        "bfloat16": "bf16",
        "float64": "fp64",
        "int32": "i32",
        "int64": "i64",
        "int16": "i16",
        "int8": "i8",
        "uint8": "u8",
        "bool": "i1",
        "float8_e4m3fn": "fp8e4nv",
        "float8_e5m2": "fp8e5",
    }.get(name, "fp32")


# -- launches across processes (interpreter worker -> ahead-of-time worker) ----------------


def _encode(value: Any) -> dict[str, Any]:
    if isinstance(value, TensorSpec):
        return {
            "tensor": str(value.dtype).replace("torch.", ""),
            "shape": list(value.shape),
            "strides": list(value.strides),
            "ptr_mod": value.ptr_mod,
        }
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    module = type(value).__module__ or ""
    if module.startswith("triton.language") and hasattr(value, "name"):
        return {"tl": str(value.name)}
    return {"repr": repr(value)[:200]}


def _decode(node: dict[str, Any]) -> Any:
    if "tensor" in node:
        import torch

        dtype = getattr(torch, str(node["tensor"]), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {node['tensor']}")
        return TensorSpec(dtype, tuple(node["shape"]), tuple(node["strides"]), int(node["ptr_mod"]))
    if "v" in node:
        return node["v"]
    if "tl" in node:
        import triton.language as tl

        value = getattr(tl, str(node["tl"]), None)
        if value is None:
            raise ValueError(f"unknown triton.language value {node['tl']}")
        return value
    raise ValueError(f"cannot rebuild argument {node.get('repr')}")


def launches_to_json() -> list[dict[str, Any]]:
    """The recorded launches as JSON: kernel name and file, encoded arguments."""
    out = []
    for spec in RECORDED.values():
        fn = getattr(spec.kernel, "fn", spec.kernel)
        code = getattr(fn, "__code__", None)
        out.append(
            {
                "kernel": spec.name,
                "file": code.co_filename if code is not None else None,
                "args": [_encode(a) for a in spec.args],
                "kwargs": {k: _encode(v) for k, v in spec.kwargs.items()},
            }
        )
    return out


def find_kernel(name: str, file: str | None) -> Any:
    """The ``JITFunction`` called ``name`` defined in ``file``, among loaded modules
    (unwrapping autotuners and heuristics)."""
    import sys

    from triton.runtime.jit import JITFunction

    for module in list(sys.modules.values()):
        module_file = getattr(module, "__file__", None)
        if file and module_file and os.path.realpath(module_file) != os.path.realpath(file):
            continue
        for value in list(vars(module).values()) if module is not None else []:
            seen = 0
            while value is not None and not isinstance(value, JITFunction) and seen < 4:
                value = getattr(value, "fn", None)
                seen += 1
            if isinstance(value, JITFunction) and value.fn.__name__ == name:
                return value
    raise LookupError(f"kernel {name} not found in {file}")


def launches_from_json(items: list[dict[str, Any]]) -> tuple[list[LaunchSpec], list[str]]:
    specs, notes = [], []
    for item in items:
        try:
            kernel = find_kernel(str(item["kernel"]), item.get("file"))
            args = tuple(_decode(a) for a in item.get("args") or [])
            kwargs = {k: _decode(v) for k, v in (item.get("kwargs") or {}).items()}
        except Exception as exc:
            notes.append(f"launch of {item.get('kernel')} not rebuilt: {exc}"[:300])
            continue
        specs.append(LaunchSpec(kernel, str(item["kernel"]), args, kwargs))
    return specs, notes
