"""check_kernel's problems: the folders a client may name a problem under, fixed when the
server starts (a problem is code the server imports and runs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import shown
from ..tools.base import Tool, ToolError


class ProblemRoots:
    """The folders ``check_kernel`` may take a problem from, fixed at start.

    Loading a problem imports its ``problem.py``: a client that could name any path
    could run any Python file on the machine that looks like a problem. A path is
    resolved (symlinks and ``..`` followed) before it is compared, so a link inside a
    root that points out of it is refused too. The server's own ``--problem`` is the
    operator's choice and always allowed.
    """

    def __init__(self, roots: Sequence[str | Path], problem: str | Path | None = None) -> None:
        self.roots = [Path(r).resolve() for r in roots] or [Path.cwd().resolve()]
        self.problem = Path(problem).resolve() if problem else None

    def admit(self, problem: str) -> str:
        """The resolved path of ``problem``; ToolError when it lies outside every root."""
        try:
            path = Path(problem).resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # NUL byte, a symlink loop
            raise ToolError(
                f"check_kernel: problem {shown(problem)} is not a usable path: {exc}"
            ) from None
        allowed = [*self.roots, *([self.problem] if self.problem else [])]
        if not any(path.is_relative_to(root) for root in allowed):
            roots = ", ".join(str(r) for r in self.roots)
            raise ToolError(
                f"check_kernel: problem {shown(problem)} is outside the folders this server "
                f"takes problems from ({roots}); the operator can add one with --problems-root"
            )
        return str(path)

    def guard(self, tool: Tool) -> Tool:
        """``tool`` (check_kernel) with each call's ``problem`` admitted first."""
        inner = tool.handler

        def handler(ws: Any, args: dict[str, Any]) -> str:
            if args.get("problem") is not None:
                args = {**args, "problem": self.admit(str(args["problem"]))}
            return inner(ws, args)

        return replace(tool, handler=handler)
