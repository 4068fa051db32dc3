"""``ctxkernel agent PROBLEM``: run the agent loop (Claude + the index + the harness).

Prints one line per version and the stop on stdout (JSON Lines with ``--json``: types
``run``, ``version``, ``proof``, ``note``, ``stop``, ``summary``); requests and tool calls
go to stderr with ``--verbose``, retries always. On a terminal (without ``--json``) the
live view draws the versions table, what the run is doing and its cost instead
(``agent/console.py``); ``--interactive`` adds the engineer's console. ``--note`` (with
``--resume``) and ``runs/agent/RUN/steer.md`` steer a run without a terminal. Exit 0 when
a correct version exists, 1 when none does, 2 on an error (a missing key, a bad problem,
``--interactive`` without a terminal, the API failing for good: the run is kept and
``--resume RUN`` continues it).

Its options are declared once (``harness.optionspec``): the run's in ``AgentConfig``
(``agent/state.py``, kept in ``run.json``), the command's own in ``AgentCommand``.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from harness.optionspec import click_options, from_cli, option, values_from_cli

from ..agent.client import RetryPolicy
from ..agent.state import AgentConfig
from ..errors import UserError
from ..render import json_line
from .common import index_options, json_option

# what a resumed run keeps from its start whatever the command line says
FIXED_ON_RESUME = ("backend", "device")


@dataclass(frozen=True, kw_only=True)
class AgentCommand:
    """What ``agent`` is asked besides the run's configuration (``AgentConfig``): the run
    to continue, the API's retries, where the best goes, how the run is shown and steered.
    Both are declared once and the click options come from them."""

    resume: str | None = field(
        default=None,
        metadata=option(
            "--resume",
            metavar="RUN",
            help="Continue a run (id, unique part of one, 'last' or its directory).",
        ),
    )
    max_retries: int = field(
        default=RetryPolicy.max_attempts,
        metadata=option(
            "--max-retries", low=1, help="Attempts per API call on 429/529/5xx answers."
        ),
    )
    out: Path | None = field(
        default=None, metadata=option("--out", help="Also copy the best correct version here.")
    )
    interactive: bool = field(
        default=False,
        metadata=option(
            "-i",
            "--interactive",
            help="Steer the run from this terminal: after each checked version, Enter "
            "goes on, text is guidance for the model, /help lists the commands.",
        ),
    )
    notes: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--note",
            many=True,
            metavar="TEXT",
            help="Guidance for the model, sent as the engineer's words in its first turn "
            "(with --resume: continues the run). Repeatable.",
        ),
    )
    verbose: bool = field(
        default=False, metadata=option("-v", "--verbose", help="Requests and tool calls on stderr.")
    )


@click.command("agent")
@click.argument("problem", required=False, type=click.Path(path_type=Path))
@click_options(AgentConfig)
@click_options(AgentCommand)
@index_options
@json_option
@click.pass_context
def agent_cmd(ctx: click.Context, problem: Path | None, **opts: Any) -> int:
    """Let Claude write a kernel for PROBLEM, checked by the harness, informed by the index.

    Needs ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL is honoured). Every version, verdict and
    call is kept under runs/agent/<run-id>/; the best correct version is best.py there.

    \b
    Examples:
      ctxkernel agent examples/softmax --model claude-sonnet-5-5 --max-iters 20 --target 0.8
      ctxkernel agent examples/matmul_bf16 --samples 4 --max-cost 5 --thinking-budget 8000
      ctxkernel agent --resume last --max-iters 30
      ctxkernel agent examples/softmax --interactive
      ctxkernel agent --resume last --note "memory-bound: one pass, wider loads"
    """
    from ..agent import Agent, APIFailure
    from ..agent.steer import Steering

    command = from_cli(AgentCommand, opts)
    as_json = opts["as_json"]
    printer = Printer(as_json=as_json, verbose=command.verbose)
    view = _view(command, as_json)
    sink = printer if view is None else _Deferred(view, printer)
    steering = Steering(command.notes, reviewer=view if command.interactive else None)
    try:
        if command.resume:
            if problem is not None:
                raise UserError("give either PROBLEM or --resume RUN, not both")
            overrides = _overrides(ctx, opts)
            agent = Agent.resume(
                command.resume, overrides, lambda c: _client(c, command), on_event=sink,
                steering=steering,
            )  # fmt: skip
        else:
            if problem is None:
                raise UserError("missing PROBLEM (a problem.py or its directory), or --resume RUN")
            config = from_cli(
                AgentConfig,
                opts,
                problem=str(problem),
                index_dir=opts["index_dir"],
                chroma_url=opts["chroma_url"],
            )
            client = _client(config, command)
            client.check_credentials()
            agent = Agent.start(config, client, on_event=sink, steering=steering)
    except (APIFailure, ValueError) as exc:
        if view is not None:
            view.close()
        raise UserError(str(exc)) from None
    except BaseException:
        if view is not None:
            view.close()
        raise
    if view is None:
        result = agent.run()
    else:
        view.start()
        try:
            result = agent.run()
        finally:
            view.close()
            assert isinstance(sink, _Deferred)
            sink.flush()
    summary = result.summary
    if command.out is not None and result.best is not None:
        shutil.copyfile(result.record.path / "best.py", command.out)
        printer.note(f"best version copied to {command.out}")
    if summary.get("stop_reason") == "api-error":
        raise UserError(
            f"the API failed: {summary.get('stop_detail')} (run kept; continue with "
            f"`ctxkernel agent --resume {result.record.id}`)"
        )
    return 0 if result.best is not None else 1


def _view(command: AgentCommand, as_json: bool) -> Any:
    """The live view on a terminal (the console with --interactive), else None."""
    interactive = command.interactive
    if interactive and as_json:
        raise UserError("--interactive draws on the terminal; it does not go with --json")
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    if interactive and not tty:
        raise UserError(
            "--interactive needs a terminal (stdin and stdout); without one, steer the run "
            "with --resume RUN --note TEXT or by appending to runs/agent/RUN/steer.md"
        )
    if interactive:
        from ..agent.console import Console

        return Console(verbose=command.verbose)
    if sys.stdout.isatty() and not as_json:
        from ..agent.console import LiveView

        return LiveView(verbose=command.verbose)
    return None


class _Deferred:
    """Events to the live view while it runs; the stop and summary lines are printed
    after it has closed, so they stay below the last table."""

    def __init__(self, view: Any, printer: Printer) -> None:
        self.view = view
        self.printer = printer
        self.later: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("type") in ("stop", "summary"):
            self.later.append(event)
        if event.get("type") != "summary":
            self.view(event)

    def flush(self) -> None:
        for event in self.later:
            self.printer(event)
        self.later = []


def _overrides(ctx: click.Context, opts: dict[str, Any]) -> dict[str, Any]:
    """The run's options given on this command line (not defaults) that change a resumed run."""
    given = {
        name: value
        for name, value in opts.items()
        if ctx.get_parameter_source(name)
        in (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    }
    values = values_from_cli(AgentConfig, given)
    return {name: value for name, value in values.items() if name not in FIXED_ON_RESUME}


def _client(config: AgentConfig, command: AgentCommand) -> Any:
    from ..agent.client import ModelClient, ModelSettings, Price, thinking_param

    settings = ModelSettings(
        model=config.model,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        thinking=thinking_param(config.thinking_budget),
    )
    price = Price(config.price[0], config.price[1], "option") if config.price else None
    return ModelClient(settings, price=price, retry=RetryPolicy(max_attempts=command.max_retries))


class Printer:
    """Renders the loop's events: data on stdout, progress on stderr."""

    def __init__(self, *, as_json: bool, verbose: bool) -> None:
        self.as_json = as_json
        self.verbose = verbose

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self.as_json:
            if kind in ("run", "version", "proof", "note", "stop", "summary"):
                json_line(event)
                sys.stdout.flush()
            elif kind == "retry":
                self.note(_retry_line(event))
            return
        handler = getattr(self, f"_{kind}", None)
        if handler is not None:
            handler(event)

    def out(self, text: str) -> None:
        click.echo(text)

    def note(self, text: str) -> None:
        click.echo(text, err=True)

    def _run(self, e: dict[str, Any]) -> None:
        verb = "resuming" if e.get("resumed") else "run"
        self.out(f"{verb} {e['id']}  ({e['problem']}, {e['backend']}, {e['model']}, {e['device']})")
        self.out(f"records: {e['path']}")

    def _request(self, e: dict[str, Any]) -> None:
        if self.verbose:
            u = e["usage"]
            cost = f", ${e['cost']:.4f}" if e.get("cost") is not None else ""
            self.note(
                f"  call {e['call']} (round {e['round']}, sample {e['sample'] + 1}): "
                f"{_tokens(u)}{cost} -> {e['stop_reason']}"
            )

    def _tool(self, e: dict[str, Any]) -> None:
        if self.verbose:
            args = json.dumps(e.get("input"), ensure_ascii=False)
            self.note(f"  {e['name']} {args[:120]}" + (" (error)" if e.get("is_error") else ""))

    def _retry(self, e: dict[str, Any]) -> None:
        self.note(_retry_line(e))

    def _nudge(self, e: dict[str, Any]) -> None:
        self.note(f"  no version this round ({e.get('reason')}); asking again")

    def _trim(self, e: dict[str, Any]) -> None:
        if self.verbose:
            self.note(
                f"  trimmed {e['blocks']} old blocks (~{e['tokens_before']} -> {e['tokens_after']} tokens)"
            )

    def _version(self, e: dict[str, Any]) -> None:
        notes = f"  -- {e['notes']}" if e.get("notes") else ""
        self.out(f"v{e['version']:<3} round {e.get('round', '?'):<3} {e['headline']}{notes}")

    def _proof(self, e: dict[str, Any]) -> None:
        self.out("     " + str(e.get("line", "")))

    def _note(self, e: dict[str, Any]) -> None:
        self.out(f"     note ({e.get('source')}) -> model: {e.get('text')}")

    def _stop(self, e: dict[str, Any]) -> None:
        self.out(f"stop: {e['reason']}" + (f" -- {e['detail']}" if e.get("detail") else ""))

    def _summary(self, e: dict[str, Any]) -> None:
        best = e.get("best")
        if best:
            self.out(f"best: v{best['version']} -> {e['best_path']}")
        else:
            self.out("best: none correct")
        if e.get("overfit"):
            listed = ", ".join(f"v{n}" for n in e["overfit"])
            self.out(f"overfit: {listed} (pass the public shapes, fail shapes they never saw)")
        u = e["usage"]
        cost = f"${e['cost_usd']:.4f}" if e.get("cost_usd") is not None else "cost unknown"
        if e.get("price_source") == "family estimate":
            cost += " (estimated price)"
        self.out(
            f"usage: {e['calls']} calls, {_tokens(u)}; {cost}; {e['retries']} retries; "
            f"{e['wall_s']:.0f} s"
        )


def _tokens(u: dict[str, Any]) -> str:
    return (
        f"{u['input_tokens']:,} in + {u['cache_read_tokens']:,} cache read + "
        f"{u['cache_write_tokens']:,} cache write, {u['output_tokens']:,} out"
    )


def _retry_line(e: dict[str, Any]) -> str:
    return f"  retry {e['attempt']}: {e['error']} -- waiting {e['wait_s']:.1f} s"
