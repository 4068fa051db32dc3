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
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from harness import RunOptions
from harness.backends import backend_names

from ..errors import UserError
from ..render import json_line
from .common import index_options, json_option

BACKENDS = backend_names()  # the harness's backend registry
# option name -> AgentConfig field; what --resume lets a command line change
RESUMABLE = {
    "model": "model",
    "max_iters": "max_iters",
    "target": "target",
    "samples": "samples",
    "max_tokens": "max_tokens",
    "temperature": "temperature",
    "thinking_budget": "thinking_budget",
    "max_cost": "max_cost",
    "max_wall": "max_wall_s",
    "token_budget": "token_budget",
    "patience": "patience",
    "trials": "trials",
    "check_timeout": "check_timeout_s",
    "context_tokens": "context_tokens",
    "price": "price",
    "runner": "runner",
    "lookups": "lookups_per_version",
}


def parse_duration(text: str | None) -> float | None:
    """``90``, ``90s``, ``30m``, ``2h`` -> seconds."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not match:
        raise UserError(f"--max-wall: expected seconds or 30m / 2h, got {text!r}")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


@click.command("agent")
@click.argument("problem", required=False, type=click.Path(path_type=Path))
@click.option(
    "--backend", type=click.Choice(BACKENDS), default="triton", show_default=True,
    help="The backend the kernel is written in (declared to the harness).",
)  # fmt: skip
@click.option(
    "--model", default=None, envvar="CTXKERNEL_MODEL", metavar="ID",
    help="Claude model id (default claude-sonnet-5-5; env CTXKERNEL_MODEL).",
)  # fmt: skip
@click.option("--max-iters", type=click.IntRange(1), default=20, show_default=True,
              help="Rounds that submit versions (each round: --samples versions).")  # fmt: skip
@click.option("--target", type=click.FloatRange(0.0, 1.0), default=0.8, show_default=True,
              help="Stop when the best correct version reaches this fraction of the roofline.")  # fmt: skip
@click.option("--samples", type=click.IntRange(1, 16), default=1, show_default=True,
              help="Independent versions per round, checked concurrently.")  # fmt: skip
@click.option("--resume", metavar="RUN", default=None,
              help="Continue a run (id, unique part of one, 'last' or its directory).")  # fmt: skip
@click.option("--max-tokens", type=click.IntRange(256), default=16000, show_default=True,
              help="max_tokens of each response.")  # fmt: skip
@click.option("--temperature", type=click.FloatRange(0.0, 1.0), default=None,
              help="Sampling temperature (not sent with thinking).")  # fmt: skip
@click.option("--thinking-budget", default=None, metavar="N|adaptive",
              help="Extended thinking: a token budget >= 1024, or 'adaptive'.")  # fmt: skip
@click.option("--max-cost", type=click.FloatRange(0.0), default=None, metavar="USD",
              help="Stop when the run has cost this many dollars.")  # fmt: skip
@click.option("--max-wall", default=None, metavar="DURATION",
              help="Stop after this much wall time for the run (90, 30m, 2h).")  # fmt: skip
@click.option("--token-budget", type=click.IntRange(1), default=None, metavar="N",
              help="Stop when the run has used this many tokens (input + output + cache).")  # fmt: skip
@click.option("--patience", type=click.IntRange(1), default=5, show_default=True,
              help="Stop after this many rounds without improvement.")  # fmt: skip
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default=None,
              help="Where candidates run (default: cuda when present).")  # fmt: skip
@click.option("--runner", default=None, metavar="SPEC",
              help="Where candidates are checked: local, pool, ssh://host, ray (default: "
              "local, or pool with --samples > 1; see `ctxkernel check --help`). With a "
              "remote runner pass --device cuda.")  # fmt: skip
@click.option("--seeds", "trials", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Trials (fresh inputs) per shape in each check.")  # fmt: skip
@click.option("--check-timeout", type=click.FloatRange(1.0), default=RunOptions.timeout_s, show_default=True,
              help="Seconds per harness worker request (as `check --timeout`).")  # fmt: skip
@click.option("--context-tokens", type=click.IntRange(4000), default=100_000, show_default=True,
              help="Trim old turns when the conversation grows past this.")  # fmt: skip
@click.option("--price", default=None, metavar="IN,OUT",
              help="Dollars per million input,output tokens (default: the model's list price).")  # fmt: skip
@click.option("--lookups", type=click.IntRange(1), default=12, show_default=True,
              help="Tool calls in a round before the model is told to submit a version.")  # fmt: skip
@click.option("--max-retries", type=click.IntRange(1), default=6, show_default=True,
              help="Attempts per API call on 429/529/5xx answers.")  # fmt: skip
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Also copy the best correct version here.")  # fmt: skip
@click.option("-i", "--interactive", is_flag=True,
              help="Steer the run from this terminal: after each checked version, Enter "
              "goes on, text is guidance for the model, /help lists the commands.")  # fmt: skip
@click.option("--note", "notes", multiple=True, metavar="TEXT",
              help="Guidance for the model, sent as the engineer's words in its first turn "
              "(with --resume: continues the run). Repeatable.")  # fmt: skip
@click.option("-v", "--verbose", is_flag=True, help="Requests and tool calls on stderr.")
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
    from ..agent import Agent, AgentConfig, APIFailure
    from ..agent.steer import Steering

    as_json = opts["as_json"]
    printer = Printer(as_json=as_json, verbose=opts["verbose"])
    view = _view(opts)
    sink = printer if view is None else _Deferred(view, printer)
    steering = Steering(opts["notes"], reviewer=view if opts["interactive"] else None)
    try:
        if opts["resume"]:
            if problem is not None:
                raise UserError("give either PROBLEM or --resume RUN, not both")
            overrides = _overrides(ctx, opts)
            agent = Agent.resume(
                opts["resume"], overrides, lambda c: _client(c, opts), on_event=sink,
                steering=steering,
            )  # fmt: skip
        else:
            if problem is None:
                raise UserError("missing PROBLEM (a problem.py or its directory), or --resume RUN")
            given = {name: _value(option, opts[option]) for option, name in RESUMABLE.items()}
            config = AgentConfig(
                problem=str(problem),
                backend=opts["backend"],
                index_dir=opts["index_dir"],
                chroma_url=opts["chroma_url"],
                **{k: v for k, v in given.items() if v is not None},
            )
            client = _client(config, opts)
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
    if opts["out"] is not None and result.best is not None:
        shutil.copyfile(result.record.path / "best.py", opts["out"])
        printer.note(f"best version copied to {opts['out']}")
    if summary.get("stop_reason") == "api-error":
        raise UserError(
            f"the API failed: {summary.get('stop_detail')} (run kept; continue with "
            f"`ctxkernel agent --resume {result.record.id}`)"
        )
    return 0 if result.best is not None else 1


def _view(opts: dict[str, Any]) -> Any:
    """The live view on a terminal (the console with --interactive), else None."""
    interactive = opts["interactive"]
    if interactive and opts["as_json"]:
        raise UserError("--interactive draws on the terminal; it does not go with --json")
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    if interactive and not tty:
        raise UserError(
            "--interactive needs a terminal (stdin and stdout); without one, steer the run "
            "with --resume RUN --note TEXT or by appending to runs/agent/RUN/steer.md"
        )
    if interactive:
        from ..agent.console import Console

        return Console(verbose=opts["verbose"])
    if sys.stdout.isatty() and not opts["as_json"]:
        from ..agent.console import LiveView

        return LiveView(verbose=opts["verbose"])
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


def _value(option: str, value: Any) -> Any:
    if option == "max_wall":
        return parse_duration(value)
    if option == "price" and value is not None:
        from ..agent.client import Price

        price = Price.parse(value)
        return [price.input, price.output]
    if option == "thinking_budget" and value is not None:
        from ..agent.client import thinking_param

        thinking_param(value)  # validate now, not at the first call
        return value if value == "adaptive" else int(value)
    return value


def _overrides(ctx: click.Context, opts: dict[str, Any]) -> dict[str, Any]:
    """The options given on this command line (not defaults) that change a resumed run."""
    out: dict[str, Any] = {}
    for option, name in RESUMABLE.items():
        source = ctx.get_parameter_source(option)
        if source in (
            click.core.ParameterSource.COMMANDLINE,
            click.core.ParameterSource.ENVIRONMENT,
        ):
            out[name] = _value(option, opts[option])
    return out


def _client(config: Any, opts: dict[str, Any]) -> Any:
    from ..agent.client import ModelClient, ModelSettings, Price, RetryPolicy, thinking_param

    settings = ModelSettings(
        model=config.model,
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        thinking=thinking_param(config.thinking_budget),
    )
    price = Price(config.price[0], config.price[1], "option") if config.price else None
    return ModelClient(settings, price=price, retry=RetryPolicy(max_attempts=opts["max_retries"]))


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
