"""``ctxkernel sandbox``: run any command exactly as a candidate's worker is run.

``sandbox run [--device D] [--backend B] -- CMD ARGS...`` prints the command's output and
exits with its status; ``--explain`` (no command) reports what a worker can see, write
and reach on this machine. For operators who audit the sandbox with their own probes.
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

import click

from ..errors import UserError
from .common import json_option


@click.group("sandbox")
def sandbox_group() -> None:
    """Run commands inside the worker sandbox (audits, probes)."""


@sandbox_group.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="The device whose worker environment to use.")  # fmt: skip
@click.option("--backend", default="", help="Add this backend's worker environment (caches).")
@click.option("--bind", "binds", multiple=True, type=click.Path(exists=True),
              help="A path the command may read (read-only), as a worker reads its problem.")  # fmt: skip
@click.option("--explain", is_flag=True,
              help="Run a built-in probe instead: what the worker sees, may write and reach.")  # fmt: skip
@json_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run_cmd(
    device: str,
    backend: str,
    binds: tuple[str, ...],
    explain: bool,
    command: tuple[str, ...],
    **kw: Any,
) -> int:
    """Run COMMAND as a check's worker is run: the same namespaces, read-only mounts,
    landlock and seccomp walls, limits and scrubbed environment, in a fresh temp folder
    (its working directory and the only folder it may write). Exits with COMMAND's
    status (128+N when a signal N ended it).

    \b
    ctxkernel sandbox run -- python3 -c 'import os; print(os.getpid())'
    ctxkernel sandbox run --explain
    """
    from harness.process import sandbox, sandboxrun

    if backend:
        from harness.backends import backend_names

        if backend not in backend_names():
            raise UserError(f"unknown backend {backend!r} (one of {', '.join(backend_names())})")
    try:
        sandbox.isolation()
    except sandbox.SandboxError as exc:
        raise UserError(str(exc)) from None
    if explain:
        if command:
            raise UserError("--explain runs its own probe: give no command with it")
        doc = sandboxrun.explain(device, backend)
        if kw.get("as_json"):
            click.echo(json.dumps(doc))
        else:
            click.echo(sandboxrun.render_explain(doc))
        return 2 if "error" in doc["worker"] else 0
    if not command:
        raise UserError("give a command to run: ctxkernel sandbox run -- CMD ARGS...")
    if shutil.which(command[0]) is None:  # the launcher would exit 127 with less to say
        raise UserError(f"no such command: {command[0]!r} (not a path, not on PATH)")
    code, _, _, _ = sandboxrun.run_sandboxed(list(command), device, backend, binds=list(binds))
    if code < 0:
        code = 128 - code
    sys.stdout.flush()
    return code
