"""``ctxkernel check PROBLEM CANDIDATE``: the harness's check, under the ctxkernel CLI.

A thin wrapper: the options (declared once, in ``harness.cli.CheckCommand`` and
``harness.options.RunOptions``) and the work live in ``harness.cli``; harness usage errors
become ``UserError`` (one line, exit 2). Through the check server (``harness/server/client.py``)
the server runs the harness only: the evidence hook below runs here, in the client, on
the verdict the server hands back before it prints, so the output is the same either way.
``ctxkernel check-server status|stop`` is ``harness.cli.check_server_group``.
"""

from __future__ import annotations

from typing import Any

import click

from harness.cli import check_from_cli, check_options, check_server_group
from harness.errors import UsageError

from ..errors import UserError


@click.command("check")
@check_options
def check_cmd(**kwargs: Any) -> int:
    """Check CANDIDATE against PROBLEM: pre-checks, compile, run, correctness, anti-cheat.

    PROBLEM is a native problem.py (or its directory), a GPU MODE reference.py directory
    or a KernelBench Model file. Several CANDIDATES are checked concurrently: --runner
    pool (one slot per GPU, or --jobs CPU slots), ssh://user@host[:port], ray or
    ray://host:port; --resume BATCH skips the candidates an interrupted batch finished.
    Exit 0 when every rung (of every candidate) passed, 1 when a verdict is a failure, 2
    on a usage error. With an index holding the PTX manual, the dumps rung's findings
    (an MMA without WGMMA on sm_90, ...) come with the ids of a section and an example.

    One local check runs in a background check server that keeps torch and a worker
    template warm between calls (--no-server or CTXKERNEL_CHECK_SERVER=0: in this process).
    """
    try:
        return check_from_cli(kwargs, annotate=_evidence)
    except UsageError as exc:
        raise UserError(str(exc)) from None


def _evidence(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Hit ids that explain the dumps findings, from the default index when it has the
    PTX manual (``ctxkernel/evidence.py``); nothing without one."""
    from .. import evidence

    def store() -> Any:
        from ..workspace import Workspace

        return Workspace().store

    return [{**e.to_json(), "line": e.line()} for e in evidence.for_verdict_quietly(store, doc)]


check_server_cmd = check_server_group()
