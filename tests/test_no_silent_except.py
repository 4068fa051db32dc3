"""No silent ``except Exception``: a handler of ``Exception``, ``BaseException`` or a bare
``except:`` in ctxkernel/ or harness/ uses what it caught (reports, wraps or stores it:
its bound name, ``traceback.format_exc()``, ``log.exception``), re-raises, or says beside
it why swallowing is right -- a ``#`` comment on the ``except`` line or on a comment line
right above it. ``contextlib.suppress(Exception)`` is the same swallow and needs the same
reason on its ``with`` line. A lint directive (``noqa``, ``type: ignore``, ``pragma: no
cover``) is not a reason."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("ctxkernel", "harness")
BROAD = frozenset({"Exception", "BaseException"})
# calls that report the exception being handled without naming it
REPORTERS = frozenset({"format_exc", "print_exc", "exc_info", "exception"})
_DIRECTIVES = re.compile(
    r"noqa(?::\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?|type:\s*ignore(?:\[[^\]]*\])?"
    r"|pragma:\s*no\s*(?:cover|branch)",
    re.IGNORECASE,
)


def _is_broad(node: ast.expr | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Tuple):
        return any(_is_broad(e) for e in node.elts)
    if isinstance(node, ast.Name):
        return node.id in BROAD
    if isinstance(node, ast.Attribute):
        return node.attr in BROAD
    return False


def _truthy(value: ast.expr) -> bool:
    return not (isinstance(value, ast.Constant) and not value.value)


def _reports(handler: ast.ExceptHandler) -> bool:
    """The body uses the bound name, re-raises, or reports the exception being handled."""
    for stmt in handler.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Raise):
                return True
            if isinstance(node, ast.Name) and handler.name and node.id == handler.name:
                return True
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in REPORTERS:
                    return True
                if any(k.arg == "exc_info" and _truthy(k.value) for k in node.keywords):
                    return True
    return False


def _reasons(source: str) -> tuple[set[int], set[int]]:
    """Lines with a comment that gives a reason, and lines that hold only such a comment."""
    commented: set[int] = set()
    alone: set[int] = set()
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        text = _DIRECTIVES.sub("", tok.string.lstrip("#"))
        if sum(c.isalpha() for c in text) < 3:
            continue
        row = tok.start[0]
        commented.add(row)
        if lines[row - 1].lstrip().startswith("#"):
            alone.add(row)
    return commented, alone


def _suppresses_broadly(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "suppress" and any(_is_broad(a) for a in call.args)


def silent_handlers(source: str) -> list[int]:
    """Line numbers of the broad handlers (and broad ``suppress``) in ``source`` that
    swallow what they caught without a reason written beside them."""
    commented, alone = _reasons(source)

    def reasoned(line: int) -> bool:
        return line in commented or line - 1 in alone

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ExceptHandler):
            swallows = _is_broad(node.type) and not _reports(node)
        elif isinstance(node, ast.With | ast.AsyncWith):
            swallows = any(_suppresses_broadly(i) for i in node.items)
        else:
            continue
        if swallows and not reasoned(node.lineno):
            found.append(node.lineno)
    return sorted(found)


def test_checker_flags_each_silent_form() -> None:
    source = """\
import contextlib

def f(g):
    try:
        g()
    except Exception:
        pass
    try:
        g()
    except:
        return None
    for x in g():
        try:
            g(x)  # a comment that belongs to the call, not to the handler
        except (ValueError, BaseException) as exc:
            continue
    try:
        g()
    except builtins.Exception:  # noqa: BLE001
        pass
    with contextlib.suppress(Exception):
        g()
    try:
        g()
    except Exception:
        print("failed")  # a comment in the body is not beside the except
    try:
        g()
    except Exception:
        log.debug("failed", exc_info=False)
"""
    assert silent_handlers(source) == [6, 10, 15, 19, 21, 25, 29]


def test_checker_accepts_each_reasoned_form() -> None:
    source = """\
import contextlib, logging, traceback

def f(g, log):
    try:
        g()
    except Exception as exc:
        log.warning("failed: %s", exc)
    try:
        g()
    except BaseException:
        g.close()
        raise
    try:
        g()
    except Exception:
        return traceback.format_exc()
    try:
        g()
    except Exception:
        log.exception("failed")
    try:
        g()
    except Exception:  # g is candidate code: it may raise anything
        pass
    try:
        g()
    # best effort: cleanup must not mask the verdict
    except Exception:
        pass
    with contextlib.suppress(Exception):  # a closed stream has nothing left to flush
        g()
    try:
        g()
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError):
        g()
"""
    assert silent_handlers(source) == []


def test_no_silent_broad_handler_in_the_tree() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            rel = path.relative_to(REPO).as_posix()
            for line in silent_handlers(source):
                offenders.append(f"{rel}:{line}: {lines[line - 1].strip()}")
    assert not offenders, (
        "broad handlers that swallow without a reason beside them (narrow the type to what "
        "can really be raised there, or write why broad is right as a comment on the "
        "except line):\n" + "\n".join(offenders)
    )
