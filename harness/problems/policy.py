"""Forbidden-op policy: what "do not call the library op you are asked to write" means.

A problem lists ``FORBIDDEN`` entries; each expands to three views of the same ops:

- ``calls``: canonical dotted names a static scan matches (``torch.matmul``,
  ``torch.nn.functional.softmax``, ``numpy.matmul``), plus ``methods`` (``x.softmax(...)``)
  and ``matmul_operator`` (the ``@`` operator);
- ``functions``: ``__name__`` of the torch functions a ``TorchFunctionMode`` sees at run time
  (``matmul``, ``__matmul__``, ``softmax``, ``rms_norm``);
- ``aten``: the ATen ops a ``TorchDispatchMode`` sees at run time (``aten::mm``,
  ``aten::_softmax``), which also catches C++ extensions and composite decompositions.

Entries may be a group name (``"matmul"``, ``"softmax"``, ``"rms_norm"``, ``"layer_norm"``,
``"add"``), a dotted Python name (``"torch.matmul"``, ``"F.linear"``: a name that belongs
to a group pulls in the whole group), ``"@"``, or a raw ATen op (``"aten::exp"``).

Besides the problem's entries, ``add_recorded`` forbids at run time the compute ops the
reference was seen to run (``library.py``): those are ``recorded``, named as such.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class OpGroup:
    calls: frozenset[str]
    methods: frozenset[str]
    functions: frozenset[str]
    aten: frozenset[str]
    matmul_operator: bool = False


def _g(
    calls: Iterable[str],
    methods: Iterable[str],
    functions: Iterable[str],
    aten: Iterable[str],
    matmul_operator: bool = False,
) -> OpGroup:
    return OpGroup(
        frozenset(calls), frozenset(methods), frozenset(functions), frozenset(aten), matmul_operator
    )


GROUPS: dict[str, OpGroup] = {
    "matmul": _g(
        calls=[
            "torch.matmul",
            "torch.mm",
            "torch.bmm",
            "torch.addmm",
            "torch.baddbmm",
            "torch.addbmm",
            "torch.einsum",
            "torch.tensordot",
            "torch.mv",
            "torch.dot",
            "torch.inner",
            "torch.chain_matmul",
            "torch.linalg.matmul",
            "torch.linalg.multi_dot",
            "torch.nn.functional.linear",
            "torch.nn.functional.bilinear",
            "torch._scaled_mm",
            "numpy.matmul",
            "numpy.dot",
            "numpy.einsum",
            "numpy.tensordot",
            "numpy.inner",
            "numpy.vdot",
        ],
        methods=["matmul", "mm", "bmm", "addmm", "baddbmm", "__matmul__", "__rmatmul__", "mv"],
        functions=[
            "matmul",
            "mm",
            "bmm",
            "addmm",
            "baddbmm",
            "addbmm",
            "linear",
            "bilinear",
            "einsum",
            "tensordot",
            "__matmul__",
            "__rmatmul__",
            "mv",
            "chain_matmul",
            "multi_dot",
        ],
        aten=[
            "aten::mm",
            "aten::addmm",
            "aten::bmm",
            "aten::baddbmm",
            "aten::addbmm",
            "aten::matmul",
            "aten::linear",
            "aten::mv",
            "aten::addmv",
            "aten::dot",
            "aten::vdot",
            "aten::_addmm_activation",
            "aten::einsum",
            "aten::tensordot",
            "aten::_scaled_mm",
            "aten::bilinear",
        ],
        matmul_operator=True,
    ),
    "softmax": _g(
        calls=[
            "torch.softmax",
            "torch.nn.functional.softmax",
            "torch.special.softmax",
            "torch.log_softmax",
            "torch.nn.functional.log_softmax",
            "torch._softmax",
            "torch.special.log_softmax",
        ],
        methods=["softmax", "log_softmax"],
        functions=["softmax", "log_softmax", "_softmax"],
        aten=[
            "aten::_softmax",
            "aten::softmax",
            "aten::_log_softmax",
            "aten::log_softmax",
            "aten::_safe_softmax",
        ],
    ),
    "rms_norm": _g(
        calls=["torch.nn.functional.rms_norm", "torch.rms_norm"],
        methods=[],
        functions=["rms_norm"],
        aten=["aten::rms_norm", "aten::_fused_rms_norm"],
    ),
    "layer_norm": _g(
        calls=["torch.nn.functional.layer_norm", "torch.layer_norm"],
        methods=[],
        functions=["layer_norm"],
        aten=["aten::layer_norm", "aten::native_layer_norm"],
    ),
    "add": _g(
        calls=["torch.add", "numpy.add"],
        methods=["add", "add_"],
        functions=["add", "add_", "__add__", "__radd__", "__iadd__"],
        aten=["aten::add", "aten::add_"],
    ),
}

# Python-side spellings people use in FORBIDDEN lists.
ALIASES = {
    "F.": "torch.nn.functional.",
    "nn.functional.": "torch.nn.functional.",
    "np.": "numpy.",
    "nn.": "torch.nn.",
}


def canonical_name(name: str) -> str:
    for short, full in ALIASES.items():
        if name.startswith(short):
            return full + name[len(short) :]
    return name


@dataclass
class Policy:
    """The expanded forbidden-op policy of one problem."""

    entries: list[str] = field(default_factory=list)
    calls: set[str] = field(default_factory=set)
    methods: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)
    aten: set[str] = field(default_factory=set)
    matmul_operator: bool = False
    # canonical call / method / aten name -> the FORBIDDEN entry that brought it in
    origin: dict[str, str] = field(default_factory=dict)
    # ATen ops forbidden because the reference computes them (not a FORBIDDEN entry)
    recorded: set[str] = field(default_factory=set)

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> Policy:
        policy = cls(entries=[str(e) for e in entries])
        for entry in policy.entries:
            policy._add(entry)
        return policy

    def _add_group(self, entry: str, group: OpGroup) -> None:
        for name in group.calls:
            self.calls.add(name)
            self.origin.setdefault(name, entry)
        for name in group.methods:
            self.methods.add(name)
            self.origin.setdefault("." + name, entry)
        for name in group.functions:
            self.functions.add(name)
            self.origin.setdefault("fn:" + name, entry)
        for name in group.aten:
            self.aten.add(name)
            self.origin.setdefault(name, entry)
        if group.matmul_operator:
            self.matmul_operator = True

    def _add(self, entry: str) -> None:
        text = entry.strip()
        if not text:
            return
        if text.startswith("aten::"):
            op = text.split(".")[0] if text.count(".") and "::" in text else text
            self.aten.add(op)
            self.origin.setdefault(op, entry)
            return
        if text == "@":
            self._add_group(entry, GROUPS["matmul"])
            return
        if text in GROUPS:
            self._add_group(entry, GROUPS[text])
            return
        name = canonical_name(text)
        for group in GROUPS.values():
            if name in group.calls:
                self._add_group(entry, group)
                return
        # a dotted name outside the known groups: match it statically, and its last
        # component at run time (torch function mode) as a best effort.
        self.calls.add(name)
        self.origin.setdefault(name, entry)
        last = name.rsplit(".", 1)[-1]
        if name.startswith("torch."):
            self.functions.add(last)
            self.origin.setdefault("fn:" + last, entry)

    def add_recorded(self, ops: Iterable[str], allowed: Iterable[str] = ()) -> None:
        """Forbid at run time the compute ops the reference ran (``library.py``); an op the
        problem's entries forbid already keeps that origin. An op brings its in-place
        variant (``aten::add_``) and the rest of its group (``aten::mm``: every matmul)."""
        for op in ops:
            related = {op, op + "_"}
            for group in GROUPS.values():
                if op in group.aten:
                    related |= set(group.aten)
            for name in related - set(allowed):
                if name not in self.aten:
                    self.recorded.add(name)
                    self.aten.add(name)

    def __bool__(self) -> bool:
        return bool(self.calls or self.aten or self.functions or self.matmul_operator)

    def runtime(self) -> dict[str, list[str]]:
        """What the worker needs to flag forbidden ops at run time."""
        return {"aten": sorted(self.aten), "functions": sorted(self.functions)}

    def explain(self, name: str) -> str:
        """The FORBIDDEN entry that forbids ``name`` (a call, ``.method``, ``fn:x`` or aten op)."""
        return self.origin.get(name, name)


# nn modules whose forward is one of the groups: a KernelBench reference built from them
# forbids the group. Not in ``calls``: a candidate may construct them to hold parameters;
# calling them is caught at run time.
MODULES: dict[str, str] = {
    "torch.nn.Linear": "matmul",
    "torch.nn.Bilinear": "matmul",
    "torch.nn.Softmax": "softmax",
    "torch.nn.LogSoftmax": "softmax",
    "torch.nn.RMSNorm": "rms_norm",
    "torch.nn.LayerNorm": "layer_norm",
}

# Heavy library ops: used when a problem has no explicit policy but the reference's own
# heavy ops should not be called by the candidate (KernelBench importer).
HEAVY_ATEN = frozenset(
    op for name in ("matmul", "softmax", "rms_norm", "layer_norm") for op in GROUPS[name].aten
) | frozenset(
    {
        "aten::convolution",
        "aten::_convolution",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::conv_transpose3d",
        "aten::cudnn_convolution",
        "aten::mkldnn_convolution",
        "aten::_scaled_dot_product_attention",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::native_batch_norm",
        "aten::_native_batch_norm_legit",
        "aten::group_norm",
        "aten::native_group_norm",
        "aten::cumsum",
        "aten::sort",
        "aten::topk",
    }
)
