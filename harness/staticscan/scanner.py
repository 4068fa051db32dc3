"""The static scan's walk: one pass over a candidate's AST that resolves import aliases,
tracks where it is (kernel function bodies, classes, functions, the entry point) and
applies every rule as it goes, each a ``Finding`` (the rule ids are in
``rungs/precheck.py``). The names the rules match are in ``names.py``; which method
receivers are Python containers, never tensors, is ``problems/receivers.py``'s.
"""

from __future__ import annotations

import ast

from ..backends import jit_decorators
from ..problems.policy import GROUPS, Policy, canonical_name
from ..problems.receivers import Containers
from ..worker.guards import MEMORY_FILES
from .findings import Finding
from .names import (
    CACHE_DECORATORS,
    CHANNEL_CALLS,
    DYNAMIC_CALLS,
    EVASION_CALLS,
    EVASION_NAMES,
    EXIT_CALLS,
    FORBIDDEN_IMPORTS,
    FRAME_ATTRS,
    FRAME_CALLS,
    GENERIC_JIT,
    KEY_ATTRS,
    LOAD_CALLS,
    PAYLOAD_CALLS,
    PROCESS_CALLS,
    aten_op,
)


class Scanner(ast.NodeVisitor):
    def __init__(self, source: str, policy: Policy, entry: str, entry_kind: str) -> None:
        self.lines = source.splitlines()
        self.policy = policy
        self.entry = entry
        self.entry_kind = entry_kind
        self.aliases: dict[str, str] = {}
        self.findings: list[Finding] = []
        self.jit_ranges: list[tuple[int, int]] = []
        self.entry_found = False
        self.jit_depth = 0
        self.class_stack: list[str] = []
        self.function_stack: list[str] = []
        self.identity_names: set[str] = set()
        self.containers: Containers | None = None  # set by ``scan`` before the walk

    # -- helpers -------------------------------------------------------------------

    def add(self, rule: str, name: str, severity: str, node: ast.AST, message: str) -> None:
        line = getattr(node, "lineno", 0)
        code = self.lines[line - 1].strip()[:160] if 0 < line <= len(self.lines) else ""
        if any(f.rule == rule and f.line == line and f.message == message for f in self.findings):
            return
        self.findings.append(Finding(rule, name, severity, line, message, code))

    def may_be_tensor(self, receiver: ast.expr) -> bool:
        """Whether ``receiver.add(...)`` may be torch's method (not ``set.add``)."""
        return self.containers is None or not self.containers.container(receiver)

    def forbidden_method(self, node: ast.Call, imported: bool, name: str) -> str | None:
        """``.add`` for ``x.add(...)`` on what may be a tensor, or for ``torch.Tensor.add``."""
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in self.policy.methods:
            return None
        if imported:
            return "." + func.attr if name == "torch.Tensor." + func.attr else None
        return "." + func.attr if self.may_be_tensor(func.value) else None

    def forbidden_aten(self, name: str) -> str | None:
        """The ATen op ``torch.ops.aten.<op>...`` names, when the problem forbids it (ops
        forbidden only because the reference runs them are left to the run-time check)."""
        op = aten_op(name)
        if op and op in self.policy.aten and op not in self.policy.recorded:
            return op
        return None

    def dotted(self, expr: ast.AST) -> tuple[str | None, bool]:
        """Canonical dotted name of an expression, and whether its base was imported."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if isinstance(expr, ast.Name):
            base = self.aliases.get(expr.id)
            imported = base is not None
            name = ".".join([base or expr.id, *reversed(parts)])
            return canonical_name(name) if imported else name, imported
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Name)
            and expr.func.id == "super"
            and parts
        ):
            return "super()." + ".".join(reversed(parts)), False
        return None, False

    def import_error(self, module: str, node: ast.AST) -> None:
        for banned, why in FORBIDDEN_IMPORTS.items():
            if module == banned or module.startswith(banned + "."):
                rule = (
                    ("P403", "harness-evasion")
                    if why == "the harness itself"
                    else ("P402", "frame-walk")
                    if banned == "gc"
                    else ("P202", "encoded-payload")
                    if why.startswith("encoded")
                    else ("P301", "forbidden-import")
                )
                self.add(
                    rule[0],
                    rule[1],
                    "error",
                    node,
                    f"imports {module} ({why} are not allowed in a candidate)"
                    if not why.startswith("the")
                    else f"imports {module} ({why})",
                )
                return
        if module == "pip" or module.startswith(("pip.", "ensurepip")):
            self.add(
                "P203",
                "pip-install",
                "error",
                node,
                f"imports {module} (installing packages at run time)",
            )
        if module == "reference" or module.startswith("reference."):
            self.add(
                "P103", "calls-reference", "error", node, "imports the reference implementation"
            )
        if "_python_dispatch" in module:
            self.add(
                "P403",
                "harness-evasion",
                "error",
                node,
                f"imports {module} (torch dispatch internals)",
            )

    # -- imports -------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top
            self.import_error(alias.name, node)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self.aliases[alias.asname or alias.name] = full
            self.import_error(full, node)
            if (
                self.entry_kind == "function"
                and (alias.asname or alias.name) == self.entry
                and node.col_offset == 0
            ):
                self.entry_found = True
        self.import_error(module, node)
        self.generic_visit(node)

    # -- definitions ---------------------------------------------------------------

    def _is_jit(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        names, prefixes = jit_decorators()
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            name, _ = self.dotted(target)
            if name and (name.endswith((*names, *GENERIC_JIT)) or name.startswith(prefixes)):
                return True
        return False

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if (
            not self.function_stack
            and not self.class_stack
            and node.name == self.entry
            and self.entry_kind == "function"
        ):
            self.entry_found = True
        jit = self._is_jit(node)
        if jit:
            self.jit_ranges.append(
                (node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno)
            )
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            name, _ = self.dotted(target)
            if name and canonical_name(name) in CACHE_DECORATORS | {"functools.cached_property"}:
                on_entry = node.name in (self.entry, "forward")
                self.add(
                    "P502",
                    "cache-decorator",
                    "error" if on_entry else "warning",
                    deco,
                    f"{name} on {node.name}() caches results across calls",
                )
        for default in [*node.args.defaults, *node.args.kw_defaults]:
            if isinstance(default, (ast.Dict, ast.List, ast.Set)) or (
                isinstance(default, ast.Call)
                and isinstance(default.func, ast.Name)
                and default.func.id in ("dict", "list", "set")
            ):
                self.add(
                    "P503",
                    "global-state",
                    "warning",
                    default,
                    f"mutable default argument in {node.name}() keeps state across calls",
                )
        self.function_stack.append(node.name)
        self.jit_depth += int(jit)
        self.generic_visit(node)
        self.jit_depth -= int(jit)
        self.function_stack.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if (
            not self.class_stack
            and not self.function_stack
            and node.name == self.entry
            and self.entry_kind == "model"
        ):
            self.entry_found = True
        if node.name == self.entry and self.entry_kind == "model":
            for base in node.bases:
                name, _ = self.dotted(base)
                if name and name.split(".")[-1] == "Model":
                    self.add(
                        "P103",
                        "calls-reference",
                        "error",
                        base,
                        f"{node.name} subclasses the reference Model",
                    )
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        identity = self._identity_key(node.value)
        for target in node.targets:
            self._assign_target(target, node)
            if identity and isinstance(target, ast.Name):
                self.identity_names.add(target.id)  # key = (x.data_ptr(), ...) used later
            if (
                isinstance(target, ast.Name)
                and not self.function_stack
                and not self.class_stack
                and target.id == self.entry
            ):
                self.entry_found = True
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assign_target(node.target, node)
        if isinstance(node.op, ast.MatMult) and self.policy.matmul_operator and not self.jit_depth:
            self.add(
                "P101",
                "forbidden-op",
                "error",
                node,
                f"uses the @= operator ({self.policy.explain('torch.matmul')} is forbidden by the problem)",
            )
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._assign_target(target, node)
        self.generic_visit(node)

    def _assign_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._assign_target(elt, node)
            return
        if isinstance(target, ast.Attribute):
            name, imported = self.dotted(target)
            if imported and name:
                self.add(
                    "P401",
                    "monkeypatch",
                    "error",
                    node,
                    f"assigns {name} (monkeypatching an imported module or class)",
                )
            elif name and name.startswith(f"{self.entry}."):
                self.add(
                    "P503",
                    "global-state",
                    "warning",
                    node,
                    f"sets a function attribute ({name}) that persists across calls",
                )
        if isinstance(target, ast.Subscript):
            name, _ = self.dotted(target.value)
            if name in ("sys.modules", "builtins.__dict__", "__builtins__"):
                self.add("P401", "monkeypatch", "error", node, f"edits {name}")

    def visit_Global(self, node: ast.Global) -> None:
        if self.function_stack:
            self.add(
                "P503",
                "global-state",
                "warning",
                node,
                f"writes module globals ({', '.join(node.names)}) from a function",
            )
        self.generic_visit(node)

    # -- expressions ---------------------------------------------------------------

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self.policy.matmul_operator and not self.jit_depth:
            self.add(
                "P101",
                "forbidden-op",
                "error",
                node,
                f"uses the @ operator ({self.policy.explain('torch.matmul')} is forbidden by the problem)",
            )
        folded = _joined_text(node)
        if folded is not None:  # "m" + "em": only the whole sum is a name
            self._memory_file(node, folded)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            name, imported = self.dotted(node)
            if name and imported and not self.jit_depth and name in self.policy.calls:
                self.add(
                    "P101",
                    "forbidden-op",
                    "error",
                    node,
                    f"uses {name} (forbidden by the problem: {self.policy.explain(name)})",
                )
            op = self.forbidden_aten(name) if name and imported and not self.jit_depth else None
            if op:
                self.add(
                    "P101",
                    "forbidden-op",
                    "error",
                    node,
                    f"uses torch.ops.aten.{op[6:]} (forbidden by the problem: {self.policy.explain(op)})",
                )
            if node.attr in FRAME_ATTRS:
                self.add(
                    "P402",
                    "frame-walk",
                    "error",
                    node,
                    f"reads .{node.attr} (frame walking / function internals)",
                )
            if node.attr in EVASION_NAMES:
                self.add(
                    "P403",
                    "harness-evasion",
                    "error",
                    node,
                    f"uses {node.attr} (switching off the harness's op recording)",
                )
            if name in ("sys.modules",):
                parent = getattr(node, "_ck_parent", None)
                if isinstance(parent, ast.Attribute) and parent.attr in (
                    "update",
                    "pop",
                    "setdefault",
                    "clear",
                    "__setitem__",
                    "__delitem__",
                ):
                    self.add(
                        "P401", "monkeypatch", "error", node, f"edits sys.modules ({parent.attr})"
                    )
            if name in ("os.environ",) or (name and name.startswith("os.environ.")):
                self.add("P602", "env-read", "warning", node, "reads os.environ")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and not self.jit_depth:
            full = self.aliases.get(node.id)
            if full and canonical_name(full) in self.policy.calls:
                self.add(
                    "P101",
                    "forbidden-op",
                    "error",
                    node,
                    f"uses {canonical_name(full)} (forbidden by the problem: {self.policy.explain(canonical_name(full))})",
                )
            if node.id == "__builtins__":
                self.add("P402", "frame-walk", "error", node, "touches __builtins__")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            text = node.value
            if "pip install" in text or "pip3 install" in text or "-m pip" in text:
                self.add("P203", "pip-install", "error", node, "a string runs pip install")
            if "/proc/self" in text or ("/proc/" in text and "/fd" in text):
                self.add(
                    "P404",
                    "channel-tamper",
                    "error",
                    node,
                    "refers to /proc/self (file descriptors of the harness)",
                )
            self._memory_file(node, text)
        self.generic_visit(node)

    def _memory_file(self, node: ast.AST, text: str) -> None:
        """A path whose last component names a memory file (``/proc/<pid>/mem``, a bare
        ``"mem"`` joined on later, ``/dev/mem``): the inputs' bytes read past torch."""
        if text.strip().rstrip("/").rpartition("/")[2] in MEMORY_FILES:
            self.add(
                "P405",
                "memory-read",
                "error",
                node,
                f"names a memory file ({text.strip()!r}: the process's memory, read past torch)",
            )

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if exc is not None:
            name, _ = self.dotted(exc)
            if name in ("SystemExit", "KeyboardInterrupt", "builtins.SystemExit"):
                self.add(
                    "P603", "early-exit", "error", node, f"raises {name} (ending the process early)"
                )
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if not self.jit_depth:
            for handler in node.handlers:
                for inner in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
                    fallback = self._fallback_name(inner)
                    if fallback:
                        self.add(
                            "P102",
                            "library-fallback",
                            "error",
                            inner,
                            f"falls back to {fallback} when the kernel raises (try/except at line {node.lineno})",
                        )
                        break
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def _fallback_name(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            return "the @ operator"
        if not isinstance(node, ast.Call):
            return None
        name, imported = self.dotted(node.func)
        if name is None:
            method = self.forbidden_method(node, False, "")
            return f"{method}()" if method else None
        if name in ("ref_kernel", "Model") or name.endswith(".ref_kernel"):
            return name
        if imported and (
            name in self.policy.calls
            or any(name in g.calls for g in GROUPS.values() if g is not GROUPS["add"])
        ):
            return name
        if imported and self.forbidden_aten(name):
            return name
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in (
            self.policy.methods or {"matmul", "softmax", "mm", "bmm"}
        ):
            on_tensor = (
                name == "torch.Tensor." + func.attr if imported else self.may_be_tensor(func.value)
            )
            return f".{func.attr}()" if on_tensor else None
        return None

    def visit_Call(self, node: ast.Call) -> None:
        name, imported = self.dotted(node.func)
        if name is not None:
            self._call(node, name, imported)
        elif not self.jit_depth:  # a method on what no name holds: ``inputs[0].add(y)``
            self._method_call(node, False, "")
        self.generic_visit(node)

    def _method_call(self, node: ast.Call, imported: bool, canon: str) -> None:
        method = self.forbidden_method(node, imported, canon)
        if method:
            self.add(
                "P101",
                "forbidden-op",
                "error",
                node,
                f"calls {'torch.Tensor' if imported else ''}{method}() (forbidden by the problem: {self.policy.explain(method)})",
            )

    def _call(self, node: ast.Call, name: str, imported: bool) -> None:
        canon = canonical_name(name) if imported else name
        builtin = not imported and "." not in name
        if not self.jit_depth:
            if not (imported and canon in self.policy.calls):  # those: visit_Attribute / visit_Name
                self._method_call(node, imported, canon)
            if (
                builtin
                and name == "getattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and self.may_be_tensor(node.args[0])
            ):
                attr = str(node.args[1].value)
                if attr in self.policy.methods or any(
                    c.rsplit(".", 1)[-1] == attr for c in self.policy.calls
                ):
                    self.add(
                        "P101",
                        "forbidden-op",
                        "error",
                        node,
                        f"looks up {attr!r} with getattr (forbidden by the problem)",
                    )
        if builtin and name == "setattr" and node.args:
            target, target_imported = self.dotted(node.args[0])
            if target_imported or (target and target[:1].isupper()):
                self.add(
                    "P401", "monkeypatch", "error", node, f"setattr on {target} (monkeypatching)"
                )
        if name in ("ref_kernel",) or canon.endswith(".ref_kernel"):
            self.add("P103", "calls-reference", "error", node, "calls the reference ref_kernel")
        if (builtin and name == "Model") or (
            name == "super().forward" and self.class_stack and self.class_stack[0] == self.entry
        ):
            self.add("P103", "calls-reference", "error", node, f"calls the reference ({name})")
        if (builtin and name in DYNAMIC_CALLS) or canon in DYNAMIC_CALLS:
            self.add("P201", "dynamic-code", "error", node, f"calls {canon} (dynamic code)")
        if canon in PAYLOAD_CALLS or (
            not imported and name.endswith((".b64decode", ".decompress"))
        ):
            self.add(
                "P202",
                "encoded-payload",
                "error",
                node,
                f"calls {canon} (decoding an encoded payload)",
            )
        if canon in PROCESS_CALLS:
            self.add("P302", "process-call", "error", node, f"calls {canon} (process control)")
        if canon in FRAME_CALLS:
            self.add("P402", "frame-walk", "error", node, f"calls {canon} (frame or heap walking)")
        if canon in EVASION_CALLS:
            self.add("P403", "harness-evasion", "error", node, f"calls {canon}")
        if canon in CHANNEL_CALLS:
            self.add(
                "P404",
                "channel-tamper",
                "error",
                node,
                f"calls {canon} (raw file descriptors: the harness's channel is off limits)",
            )
        if (builtin and name in ("exit", "quit")) or canon in EXIT_CALLS:
            self.add(
                "P603", "early-exit", "error", node, f"calls {canon} (ending the process early)"
            )
        if canon in LOAD_CALLS:
            self.add(
                "P601", "file-read", "error", node, f"calls {canon} (loading precomputed data)"
            )
        elif (
            (builtin and name == "open")
            or canon in ("io.open", "os.open")
            or (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in ("read_text", "read_bytes")
            )
        ):
            self.add("P601", "file-read", "warning", node, f"opens files ({name})")
        if canon in ("os.getenv", "os.environ.get"):
            self.add("P602", "env-read", "warning", node, f"reads the environment ({canon})")
        if (builtin and name == "print") or canon in ("sys.stdout.write", "sys.stderr.write"):
            for arg in node.args:
                if isinstance(arg, (ast.Constant, ast.JoinedStr)):
                    text = ast.unparse(arg).lower()
                    if any(w in text for w in ("pass", "success", '"ok"', "correct", '{"')):
                        self.add(
                            "P604",
                            "fake-output",
                            "warning",
                            node,
                            "prints success-looking text (results come only from the harness channel)",
                        )
        self._replay_key(node, name)

    def _replay_key(self, node: ast.Call, name: str) -> None:
        """``cache[id(x)]``, ``x.data_ptr() in seen``, ``cache.get((x.data_ptr(), x._version))``."""
        if not isinstance(node.func, ast.Attribute) or node.func.attr not in (
            "get",
            "setdefault",
            "pop",
            "__contains__",
            "__getitem__",
        ):
            return
        for arg in node.args[:1]:
            if self._identity_key(arg):
                self.add(
                    "P501",
                    "replay-cache",
                    "error",
                    node,
                    "looks results up by tensor identity (id/data_ptr/_version): a replay cache",
                )

    def _identity_key(self, expr: ast.AST) -> bool:
        for inner in ast.walk(expr):
            if (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Name)
                and inner.func.id == "id"
            ):
                return True
            if isinstance(inner, ast.Attribute) and inner.attr in KEY_ATTRS:
                return True
            if isinstance(inner, ast.Name) and inner.id in self.identity_names:
                return True
        return False

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not self.jit_depth and self._identity_key(node.slice):
            self.add(
                "P501",
                "replay-cache",
                "error",
                node,
                "indexes a container by tensor identity (id/data_ptr/_version): a replay cache",
            )
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if (
            not self.jit_depth
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
            and self._identity_key(node.left)
        ):
            self.add(
                "P501",
                "replay-cache",
                "error",
                node,
                "tests membership by tensor identity (id/data_ptr/_version): a replay cache",
            )
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        if not self.jit_depth and any(k is not None and self._identity_key(k) for k in node.keys):
            self.add(
                "P501",
                "replay-cache",
                "error",
                node,
                "keys a dict by tensor identity (id/data_ptr/_version): a replay cache",
            )
        self.generic_visit(node)


def _joined_text(node: ast.AST) -> str | None:
    """The string a sum of string literals spells (``"m" + "em"``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _joined_text(node.left), _joined_text(node.right)
        if left is not None and right is not None:
            return left + right
    return None
