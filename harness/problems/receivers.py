"""Which method receivers in a candidate's source are Python containers, never tensors.

The static scan (``harness/staticscan/scanner.py``) matches a forbidden op as a method
(``x.add(y)``) when ``x`` may be a tensor. The method names are ordinary Python ones too
(``set.add``), so a receiver that is a Python container is not one: a set, dict or list
display or constructor written at the call, or a name (or ``self`` attribute) that every
binding in the file gives such a value (``seen = set()``). A name bound any other way
anywhere (a parameter, a loop variable, ``x = inputs[0]``) may be a tensor.
"""

from __future__ import annotations

import ast


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_CONTAINER_BUILTINS = frozenset({"set", "dict", "list", "frozenset", "bytearray"})
_CONTAINER_CALLS = _words(
    "collections.Counter collections.OrderedDict collections.defaultdict collections.deque "
)
# calls that reach a module's names by string: a name bound through them is not seen
_NAMESPACE_CALLS = frozenset({"globals", "locals", "vars"})


class Containers:
    """Names, and attributes, that only ever hold a Python container in this file.

    Flow- and scope-blind on purpose: a name counts only if every binding of it anywhere
    (assignment, parameter, loop target, import, ``with ... as``...) is a container
    display or constructor, so no path through the code can give it a tensor.
    """

    def __init__(self, tree: ast.AST) -> None:
        self.imported: dict[str, str] = {}
        bindings: list[tuple[str, str, ast.expr | None]] = []  # kind, name, value
        names_hidden = attrs_hidden = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    top = alias.name.split(".")[0]
                    self.imported[alias.asname or top] = alias.name if alias.asname else top
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name == "*":
                        names_hidden = True
                    self.imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in _NAMESPACE_CALLS:
                    names_hidden = True
                elif node.func.id == "setattr" and len(node.args) >= 2:
                    attr = node.args[1]
                    if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                        value = node.args[2] if len(node.args) > 2 else None
                        bindings.append(("attr", attr.value, value))
                    else:
                        attrs_hidden = True
            bindings += _bindings(node)
        self.bound = {name for kind, name, _ in bindings if kind == "name"} | set(self.imported)
        names: dict[str, bool] = {}
        attrs: dict[str, bool] = {}
        for kind, name, value in bindings:
            table = names if kind == "name" else attrs
            table[name] = table.get(name, True) and value is not None and self.holds(value)
        self.names = set() if names_hidden else {n for n, ok in names.items() if ok}
        self.attrs = set() if attrs_hidden else {a for a, ok in attrs.items() if ok}

    def holds(self, expr: ast.expr) -> bool:
        """Whether ``expr`` makes a set, dict or list (a display or a constructor)."""
        if isinstance(expr, (ast.Set, ast.Dict, ast.List, ast.SetComp, ast.DictComp, ast.ListComp)):
            return True
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        if isinstance(func, ast.Name) and func.id in _CONTAINER_BUILTINS:
            return func.id not in self.bound  # not a ``set`` of the candidate's own
        parts: list[str] = []
        while isinstance(func, ast.Attribute):
            parts.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id not in self.imported:
            return False
        return ".".join([self.imported[func.id], *reversed(parts)]) in _CONTAINER_CALLS

    def container(self, expr: ast.expr) -> bool:
        """Whether a method's receiver is a Python container, never a tensor."""
        if isinstance(expr, ast.Constant) or self.holds(expr):
            return True
        if isinstance(expr, ast.Name):
            return expr.id in self.names
        return (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"
            and expr.attr in self.attrs
        )


def _bindings(node: ast.AST) -> list[tuple[str, str, ast.expr | None]]:
    """What ``node`` binds: (``"name"`` or ``"attr"``, the name, the value or None when
    the value is not one expression of its own (a parameter, a loop target...))."""
    out: list[tuple[str, str, ast.expr | None]] = []

    def bind(target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            out.append(("name", target.id, value))
        elif isinstance(target, ast.Attribute):
            out.append(("attr", target.attr, value))
        elif isinstance(target, ast.Starred):
            bind(target.value, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            if values is not None and len(values) == len(target.elts) and not starred:
                for elt, item in zip(target.elts, values, strict=True):
                    bind(elt, item)
            else:
                for elt in target.elts:
                    bind(elt, None)

    if isinstance(node, ast.Assign):
        for target in node.targets:
            bind(target, node.value)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        if node.value is not None:
            bind(node.target, node.value)
    elif isinstance(node, ast.NamedExpr):
        bind(node.target, node.value)
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        bind(node.target, None)
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        bind(node.optional_vars, None)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.append(("name", node.name, None))
    elif isinstance(node, ast.arguments):
        every = [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg]
        out += [("name", a.arg, None) for a in every if a is not None]
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            out.append(("name", alias.asname or alias.name.split(".")[0], None))
    elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        out.append(("name", node.name, None))
    elif isinstance(node, ast.MatchMapping) and node.rest:
        out.append(("name", node.rest, None))
    return out
