"""Python source parsed to an AST, safely from several threads at once.

CPython 3.11 keeps the depth counter of its AST-to-Python conversion per interpreter, not
per thread: two ``ast.parse`` calls running at once in threads can fail with
``SystemError: AST constructor recursion depth mismatch``. Checks run on threads (the test
suite's verdict pool, a long-lived parent), so every parse of a problem's or a candidate's
source in the harness goes through this one lock.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, one at a time; raises ``SyntaxError`` as it does."""
    with _LOCK:
        return ast.parse(source)
