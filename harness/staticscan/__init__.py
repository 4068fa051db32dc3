"""Static scan of a candidate's source: the rules behind the ``pre-checks`` rung.

Walks the AST once, resolving import aliases (``F`` -> ``torch.nn.functional``), and
reports ``Finding``s (rule id, name, severity, line, message, source line). Bodies of
kernel functions -- decorated with a backend's ``jit_decorators`` (``@triton.jit``,
``@cute.jit``, ...; the backend registry lists them) or any decorator named ``*jit`` --
are exempt from the forbidden-op rules (``tl.dot`` and ``a @ b`` there are the kernel).
The rule table is in ``rungs/precheck.py``.

A forbidden op is matched where torch (or numpy) is named: ``torch.add``, an alias of it,
``torch.ops.aten.add`` (an ATen op the problem forbids), ``torch.Tensor.add(x, y)``; and
as a method, ``x.add(y)``, when ``x`` may be a tensor: not a receiver ``problems/receivers.py``
finds only ever holds a Python container (``seen = set()``; ``seen.add(k)``).

``scan`` (here) parses the source and runs the walk; ``scanner.py`` is the walk and every
rule it applies; ``names.py`` the names those rules match (forbidden imports, process,
frame and payload calls, ...), the same for every problem; ``findings.py`` what a scan
reports (``Finding``, ``ScanResult``).
"""

from __future__ import annotations

import ast

from ..problems.policy import Policy
from ..problems.pysource import parse as parse_source
from ..problems.receivers import Containers
from .findings import Finding, ScanResult
from .scanner import Scanner


def _link_parents(tree: ast.AST) -> None:
    """Each node's parent as ``_ck_parent`` (how the walk tells ``sys.modules.update``)."""
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._ck_parent = parent  # type: ignore[attr-defined]


def scan(
    source: str,
    policy: Policy,
    entry: str = "custom_kernel",
    entry_kind: str = "function",
    enforce_policy: bool = True,
) -> ScanResult:
    """Run every static rule over a candidate's source."""
    try:
        tree = parse_source(source)
    except SyntaxError as exc:
        line = exc.lineno or 0
        text = (exc.text or "").strip()
        return ScanResult(
            [Finding("P001", "syntax", "error", line, f"does not parse: {exc.msg}", text)],
            parsed=False,
        )
    _link_parents(tree)
    scanner = Scanner(source, policy, entry, entry_kind)
    scanner.containers = Containers(tree)
    scanner.visit(tree)
    findings = scanner.findings
    if not scanner.entry_found:
        kind = "function" if entry_kind == "function" else "class"
        findings.insert(
            0,
            Finding(
                "P002", "missing-entry", "error", 0, f"defines no {kind} {entry} at module level"
            ),
        )
    if not enforce_policy:
        # the runtime checks alone (the worker reports a missing entry point itself)
        for f in findings:
            if f.rule != "P001":
                f.severity = "warning"
    findings.sort(key=lambda f: (f.severity != "error", f.rule == "P002", f.line))
    return ScanResult(findings, scanner.jit_ranges)
