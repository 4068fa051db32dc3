"""``python -m harness check PROBLEM CANDIDATE``: the harness's own command line.

``ctxkernel check`` (``ctxkernel/cli/check.py``) reuses ``check_options`` and
``check_from_cli``. The options are declared once, in ``CheckCommand`` (this command's
own: output, ``--shapes``, several candidates) and ``RunOptions`` (how each check runs),
and generated from there (``optionspec``); ``execute_check(command, options)`` runs it. Output: the rung ladder one line per rung, then the verdict; ``--json``
prints one JSON document (``type: "verdict"``); ``--feedback`` prints the LLM feedback.
Exit 0 when every rung passed, 1 when the verdict is a failure, 2 on a usage error.
Several candidates (or ``--runner``/``--jobs``/``--resume``) go to
``harness.runners.batchcli.execute_batch``: checked concurrently, one line (or JSON
document) each, then a summary. One local check goes, by default, through this user's
check server (``harness/server/client.py``: a warm parent kept between one-shot calls;
``--no-server`` or ``CTXKERNEL_CHECK_SERVER=0`` check here); ``check-server status|stop``
lists and ends those servers.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import UsageError
from .options import RunOptions
from .optionspec import click_options, from_cli, option
from .printable import printable


def parse_shapes(
    values: tuple[str, ...], bench: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]] | None:
    """``--shapes "n=1000,m=3;n=17"`` (repeatable). Values are ints, floats or strings."""
    shapes: list[dict[str, Any]] = []
    for value in values:
        for part in value.split(";"):
            part = part.strip()
            if not part:
                continue
            shape: dict[str, Any] = {}
            for item in part.split(","):
                if "=" not in item:
                    raise UsageError(f"--shapes: expected key=value, got {item!r}")
                key, raw = (s.strip() for s in item.split("=", 1))
                shape[key] = _number(raw)
            shapes.append(shape)
    return shapes or None


def _number(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            continue
    return raw


@dataclass
class CheckCommand:
    """What ``check`` is asked besides how to run: the problem, the candidates, how to
    print, the raw ``--shapes``, and where several candidates go. How each one runs is a
    ``RunOptions``; both are declared once and the click options come from them."""

    problem: Path
    candidates: list[Path] = field(default_factory=list)
    as_json: bool = field(
        default=False,
        metadata=option("--json", help="Print one JSON document (type 'verdict')."),
    )
    feedback: bool = field(
        default=False,
        metadata=option(
            "--feedback",
            help="Print the compact feedback for an LLM instead of the ladder.",
        ),
    )
    progress: bool = field(
        default=False,
        metadata=option(
            "--progress",
            help="Also print each rung's line to stderr as it ends, with its seconds (a check "
            "that takes minutes, e.g. at upstream sizes); runs in this process.",
        ),
    )
    shapes: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--shapes",
            many=True,
            help="Shapes to check instead of the problem's SHAPES: 'n=1000,m=3;n=17', or 'bench'.",
        ),
    )
    # -- several candidates (harness/runners) --
    runner: str | None = field(
        default=None,
        metadata=option(
            "--runner",
            metavar="SPEC",
            help="Where checks run: local, pool, ssh://user@host[:port][?...], ray, ray://host:port "
            "(default: pool for several candidates, else local).",
        ),
    )
    jobs: int | None = field(
        default=None,
        metadata=option(
            "--jobs",
            low=1,
            help="Concurrent checks: pool slots (default one per GPU), threads, SSH sessions.",
        ),
    )
    resume: str | None = field(
        default=None,
        metadata=option(
            "--resume",
            metavar="BATCH",
            help="Resume a batch (its id or manifest path); finished candidates are not re-checked.",
        ),
    )
    # -- one local check: the check server (harness/server/client.py) --
    server: bool = field(
        default=True,
        metadata=option(
            "--no-server",
            help="Check in this process. By default one local check runs in a per-user "
            "background check server that keeps torch and a worker template warm between "
            "calls (env CTXKERNEL_CHECK_SERVER=0 turns it off; `check-server status|stop`).",
        ),
    )


def check_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The click arguments and options of ``check``, shared by both command lines:
    generated from ``CheckCommand`` and ``RunOptions`` (``optionspec``)."""
    import click

    fn = click_options(RunOptions)(fn)
    fn = click_options(CheckCommand)(fn)
    fn = click.argument("candidates", nargs=-1, type=click.Path(path_type=Path))(fn)
    return click.argument("problem", type=click.Path(path_type=Path))(fn)


# Given a verdict's JSON, entries (each with a "line" for text) to print after it: the
# seam where a caller with more context (ctxkernel's index) adds to a single check's
# output; the harness itself passes none.
Annotate = Callable[[dict[str, Any]], list[dict[str, Any]]]


def check_from_cli(
    values: dict[str, Any],
    echo: Callable[[str], None] | None = None,
    annotate: Annotate | None = None,
) -> int:
    """``check``'s click callback: the declared values back into the two option sets. One
    local check printed to stdout goes through the check server when it may
    (``server_may_serve``); otherwise, or when no server can be had, it runs here."""
    _hold_no_secret()
    command, options = _option_sets(values)
    if echo is None and server_may_serve(command, options):
        from .server import client as checkserver

        code = checkserver.check_through_server(values, annotate)
        if code is not None:
            return code
    return _run_here(command, options, echo, annotate)


def _hold_no_secret() -> None:
    """A check needs no key: this process forgets every secret variable (kept for
    redaction, wiped from its environment block) and is non-dumpable, so a candidate that
    got past every wall still finds nothing here to read."""
    from .process import sandbox
    from .redact import forget_env, secret_env_names

    sandbox.harden_parent()
    for name in secret_env_names():
        forget_env(name)


def check_in_process(
    values: dict[str, Any],
    echo: Callable[[str], None] | None = None,
    annotate: Annotate | None = None,
) -> int:
    """``check_from_cli`` without the check server (what the server itself runs)."""
    command, options = _option_sets(values)
    return _run_here(command, options, echo, annotate)


def _option_sets(values: dict[str, Any]) -> tuple[CheckCommand, RunOptions]:
    command = from_cli(
        CheckCommand,
        values,
        problem=values["problem"],
        candidates=list(values.get("candidates") or ()),
    )
    return command, from_cli(RunOptions, values)


def _single_local(command: CheckCommand) -> bool:
    return len(command.candidates) == 1 and not (command.runner or command.jobs or command.resume)


def server_may_serve(command: CheckCommand, options: RunOptions) -> bool:
    """One local, warm check with the server allowed (``--no-server``,
    ``CTXKERNEL_CHECK_SERVER=0``, ``CTXKERNEL_WARM=0`` and ``--cold`` keep it here)."""
    from .server.client import enabled

    return (
        command.server
        and not command.progress
        and options.warm
        and options.python is None
        and _single_local(command)
    ) and enabled()


def _run_here(
    command: CheckCommand,
    options: RunOptions,
    echo: Callable[[str], None] | None,
    annotate: Annotate | None,
) -> int:
    if _single_local(command):
        prestart(options, command.candidates[0])
    return execute_check(command, options, echo, annotate)


def prestart(options: RunOptions, candidate: Path) -> None:
    """One local check: start the worker template and the sandbox probe now, so their
    start-up overlaps this process's own imports (torch, the problem, the candidate).
    The device is guessed without torch (a wrong guess only wastes the template)."""
    import threading

    from .process import sandbox, templates

    if options.warm:
        guess = _guess_worker_env(options, candidate)
        if guess is not None:
            templates.prestart(options.python, guess[1], guess[0])
    threading.Thread(target=_probe_quietly, args=(sandbox,), daemon=True).start()


def _guess_worker_env(options: RunOptions, candidate: Path) -> tuple[str, dict[str, str]] | None:
    from .backends import detect_backend, worker_env_for
    from .problems.candidate import declared_backend, imported_modules

    try:
        source = Path(candidate).read_text(encoding="utf-8", errors="replace")
        backend = options.backend or declared_backend(source)
        backend = backend or detect_backend(imported_modules(source), source)
        device = options.device or ("cuda" if os.path.exists("/dev/nvidiactl") else "cpu")
        dump = bool(options.dump_dir or options.target)
        return backend, worker_env_for(backend, device, dump=dump)
    except Exception:  # a guess only: the check itself reports a bad candidate or option
        return None


def _probe_quietly(sandbox: Any) -> None:
    try:
        sandbox.isolation()
    except Exception:  # a probe only: the check itself reports a bad setting
        pass


def execute_check(
    command: CheckCommand,
    options: RunOptions,
    echo: Callable[[str], None] | None = None,
    annotate: Annotate | None = None,
) -> int:
    """Run the check and print it; returns the exit code. Raises ``UsageError``."""
    from .backends import get_backend, parse_target
    from .problems.candidate import load_candidate
    from .problems.problem import load_problem
    from .runner import LocalRunner
    from .runners.batchcli import is_remote

    out = echo or (lambda text: print(text, flush=True))
    if options.target:
        try:
            parse_target(str(options.target))
        except ValueError as exc:
            raise UsageError(f"--target: {exc}") from None
    loaded = load_problem(command.problem)
    if options.device == "cuda" and not is_remote(command.runner):
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is available here")
    bench = tuple(s.strip() for s in command.shapes) == ("bench",)
    if bench and not loaded.bench_shapes:
        raise UsageError(f"{loaded.name} has no BENCH_SHAPES")
    shapes = loaded.bench_shapes if bench else parse_shapes(command.shapes)
    if shapes is not None:
        options = replace(options, shapes=shapes)
    paths = list(command.candidates)
    if len(paths) != 1 or command.runner or command.jobs or command.resume:
        from .runners.batchcli import execute_batch

        return execute_batch(
            loaded,
            paths,
            options,
            command.runner,
            command.jobs,
            command.resume,
            command.as_json,
            command.feedback,
            echo=out,
        )
    cand = load_candidate(paths[0], loaded, backend=options.backend)
    if not command.as_json and not command.feedback:
        label = get_backend(cand.backend).device_label(options.resolved_device())
        print(
            f"checking {cand.path.name} against {loaded.name} ({loaded.format}) on {label}, backend {cand.backend}",
            file=sys.stderr,
        )
    verdict = LocalRunner(on_rung=_print_progress if command.progress else None).run(
        loaded, cand, options
    )
    extra = annotate(verdict.to_json()) if annotate is not None else []
    if command.as_json:
        doc = verdict.to_json()
        if extra:
            doc["evidence"] = extra
        out(json.dumps(doc))
    elif command.feedback:
        out(verdict.feedback())
        for entry in extra:
            out(printable(str(entry.get("line", "")), newlines=False))
    else:
        for line in verdict.lines():
            out(line)
        for entry in extra:
            out(printable(str(entry.get("line", "")), newlines=False))
    return 0 if verdict.ok else 1


def _print_progress(result: Any, seconds: float) -> None:
    print(f"{result.shown_line()}  ({seconds:.1f} s)", file=sys.stderr, flush=True)


def check_server_group() -> Any:
    """``check-server status|stop``: this user's check servers (``harness/server/client.py``),
    the same group under both command lines."""
    import click

    from .server import client as checkserver

    @click.group("check-server")
    def group() -> None:
        """The background check servers that serve one-shot `check` calls warm.

        One per interpreter, code and environment; each exits after
        CTXKERNEL_CHECK_SERVER_IDLE seconds without a check (default 600)."""

    @group.command("status")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON Lines (type 'check_server').")
    def status(as_json: bool) -> int:
        """List this user's check servers: pid, uptime, checks served, idle time."""
        return checkserver.print_status(as_json, echo=click.echo)

    @group.command("serve", hidden=True)
    @click.option("--socket", "path", type=click.Path(path_type=Path), required=True)
    @click.option("--fingerprint", required=True)
    def serve(path: Path, fingerprint: str) -> int:
        """Serve checks at SOCKET (started by a check's client, detached)."""
        from .server import daemon as checkdaemon

        try:
            return checkdaemon.serve(
                path, fingerprint, lambda v, a: check_in_process(v, annotate=a)
            )
        except UsageError as exc:  # one line under either command line
            raise click.ClickException(str(exc)) from None

    @group.command("stop")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON Lines (type 'stopped').")
    def stop(as_json: bool) -> int:
        """Stop every check server of this user (one busy for 10 s more gets SIGTERM)."""
        return checkserver.print_stop(as_json, echo=click.echo)

    return group


def main(argv: list[str] | None = None) -> int:
    import click

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    def group() -> None:
        """The ctxkernel verification harness."""

    @group.command("check")
    @check_options
    def check(**kwargs: Any) -> int:
        """Check CANDIDATES against PROBLEM and print the rung ladder and the verdict.

        Several candidates are checked concurrently (--runner, --jobs): one line each,
        then a summary; --resume BATCH picks up an interrupted batch."""
        return check_from_cli(kwargs)

    group.add_command(check_server_group())

    try:
        rv = group.main(args=argv, prog_name="python -m harness", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return 2
    except click.Abort:
        return 130
    except UsageError as exc:
        print(
            f"harness: error: {str(exc).splitlines()[0] if str(exc) else 'usage error'}",
            file=sys.stderr,
        )
        return 2
    except BrokenPipeError:
        return 0
    return rv if isinstance(rv, int) else 0
