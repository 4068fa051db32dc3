"""``ctxkernel runs``: the agent runs kept under ``runs/agent/`` — list, show, plot.

A RUN is its id, a unique part of one, ``last``, or its directory. ``--json`` prints JSON
Lines: ``run`` objects for the list; ``summary``, ``version``, ``note`` (the engineer's
notes, with when they arrived) and the transcript's events for ``show``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from ..render import json_line
from .common import json_option


def _records(runs_dir: Path | None) -> list[Any]:
    from ..agent.runs import list_runs

    return list_runs(runs_dir)


def _summary(record: Any) -> dict[str, Any]:
    summary = record.summary()
    if summary is not None:
        return dict(summary)
    config = record.config
    return {"id": record.id, "problem": config.get("problem"), "backend": config.get("backend"),
            "model": config.get("model"), "status": "started", "versions": len(record.versions())}  # fmt: skip


def _time(value: Any) -> str:
    from ..agent.check_tool import format_time

    return format_time(value) if isinstance(value, (int, float)) else "-"


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "-"


def _cost(value: Any) -> str:
    return f"${value:.2f}" if isinstance(value, (int, float)) else "-"


runs_dir_option = click.option(
    "--runs-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where runs live (default: runs/ under CTXKERNEL_HOME or the checkout).",
)


@click.group("runs", invoke_without_command=True)
@runs_dir_option
@json_option
@click.pass_context
def runs_group(ctx: click.Context, runs_dir: Path | None, as_json: bool) -> int:
    """List agent runs: problem, backend, model, status, best time, % of roofline,
    versions, cost. `runs show RUN` renders one; `runs plot RUN` draws its progress.

    \b
    Examples:
      ctxkernel runs
      ctxkernel runs show last
      ctxkernel runs plot 20261130-101500-softmax-3f2a -o softmax.png
    """
    if ctx.invoked_subcommand is not None:
        return 0
    records = _records(runs_dir)
    if as_json:
        for record in records:
            json_line({**_summary(record), "type": "run", "path": str(record.path)})
        return 0 if records else 1
    if not records:
        click.echo("no agent runs yet (ctxkernel agent PROBLEM starts one)", err=True)
        return 1
    rows = [
        (
            "run",
            "problem",
            "backend",
            "model",
            "status",
            "best",
            "time",
            "%roof",
            "versions",
            "cost",
        )
    ]
    for record in records:
        s = _summary(record)
        best = s.get("best") or {}
        status = s.get("stop_reason") or s.get("status") or "?"
        rows.append((
            record.id, str(s.get("problem")), str(s.get("backend") or "-"), str(s.get("model")),
            status, f"v{best['version']}" if best else "-", _time(best.get("time_us")),
            _pct(best.get("roofline")), f"{s.get('correct_versions', 0)}/{s.get('versions', 0)}",
            _cost(s.get("cost_usd")),
        ))  # fmt: skip
    _table(rows)
    return 0


def _table(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


@runs_group.command("show")
@click.argument("run")
@click.option("--transcript/--no-transcript", default=True, show_default=True,
              help="Render the conversation after the versions.")  # fmt: skip
@click.option(
    "--full", is_flag=True, help="Whole messages and tool results, not their first lines."
)
@runs_dir_option
@json_option
def show_cmd(run: str, transcript: bool, full: bool, runs_dir: Path | None, as_json: bool) -> int:
    """Show one run: its summary, the table of versions (result, time, % of roofline,
    notes) and the transcript."""
    from ..agent.runs import RunRecord

    record = RunRecord.open(run, runs_dir)
    summary = _summary(record)
    versions = record.versions()
    notes = record.notes()
    if as_json:
        json_line({**summary, "type": "summary", "path": str(record.path)})
        for v in versions:
            json_line({**v, "type": "version"})
        if not transcript:
            for note in notes:
                json_line(note)
        if transcript:
            for event in record.transcript():
                json_line({"type": event.get("type", "event"), **event})
        return 0
    config = record.config
    click.echo(f"run {record.id}  ({record.path})")
    click.echo(f"problem {summary.get('problem')} ({config.get('problem_path')}), backend "
               f"{summary.get('backend')}, model {summary.get('model')}, device {summary.get('device', '-')}")  # fmt: skip
    stop = summary.get("stop_reason") or summary.get("status")
    click.echo(
        f"status: {stop}" + (f" -- {summary['stop_detail']}" if summary.get("stop_detail") else "")
    )
    usage = summary.get("usage") or {}
    if usage:
        click.echo(
            f"usage: {summary.get('calls', 0)} calls, {usage.get('input_tokens', 0):,} in + "
            f"{usage.get('cache_read_tokens', 0):,} cache read + "
            f"{usage.get('cache_write_tokens', 0):,} cache write, "
            f"{usage.get('output_tokens', 0):,} out; cost {_cost(summary.get('cost_usd'))}; "
            f"{summary.get('retries', 0)} retries; {summary.get('wall_s', 0):.0f} s"
        )
    click.echo("")
    best = (summary.get("best") or {}).get("version")
    rows = [("v", "round", "sample", "result", "time", "%roof", "notes")]
    for v in versions:
        if v.get("overfit"):
            result = "OVERFIT (unseen shapes)"
        elif v.get("ok"):
            result = "PASSED" + (f", slower than v{v['beaten_by']}" if v.get("beaten_by") else "")
        elif v.get("error"):
            result = "not checked"
        elif "ok" in v:
            result = f"FAILED {v.get('failed_rung')}"
        else:
            result = "(checking)"
        mark = "*" if v["version"] == best else ""
        rows.append((
            f"{v['version']}{mark}", str(v.get("round", "-")), str(int(v.get("sample", 0)) + 1),
            result, _time(v.get("time_us")), _pct(v.get("roofline")), str(v.get("notes") or "")[:60],
        ))  # fmt: skip
    _table(rows)
    if best:
        proof = ((summary.get("best") or {}).get("proof")) or "not re-checked"
        click.echo(f"* best correct version: {record.path / 'best.py'} (re-check: {proof})")
    overfit = [v["version"] for v in versions if v.get("overfit")]
    if overfit:
        listed = ", ".join(f"v{n}" for n in overfit)
        click.echo(
            f"overfit the public shapes: {listed} (failed a re-check on shapes they never saw)"
        )
    steering = [e for e in record.transcript() if e.get("type") in ("note", "steer")]
    if steering:
        click.echo("\nnotes from the engineer:")
        for event in steering:
            click.echo("  " + _steering_line(event))
    if transcript:
        click.echo("\ntranscript:")
        for event in record.transcript():
            for line in render_event(event, full):
                click.echo(line)
    return 0


def _steering_line(event: dict[str, Any]) -> str:
    """A note (when it arrived, after which version, from where) or a steering action."""
    import time as _time

    when = event.get("arrived") or _time.strftime(
        "%Y-%m-%dT%H:%M:%S", _time.localtime(float(event.get("time") or 0))
    )
    if event.get("type") == "note":
        return f"{when}  after v{event.get('after_version')} ({event.get('source')}): {event.get('text')}"
    action, n = event.get("action"), event.get("version")
    words = {"pin": f"pinned v{n}", "unpin": f"unpinned v{n}", "back": f"back to v{n}",
             "stop": "stopped the run", "continue": f"kept the run going past {event.get('stop')}"}  # fmt: skip
    return f"{when}  {words.get(str(action), str(action))}"


def render_event(event: dict[str, Any], full: bool = False) -> list[str]:
    """One transcript event as a few lines of text."""
    kind = event.get("type")
    limit = None if full else 3
    if kind == "system":
        return [f"[system] {len(event.get('text', ''))} characters (system_prompt.md)"]
    if kind in ("start", "resume"):
        return [
            f"[{kind}] " + json.dumps(event.get("overrides") or {"device": event.get("device")})
        ]
    if kind == "request":
        u = event.get("usage") or {}
        cost = f", ${event['cost']:.4f}" if isinstance(event.get("cost"), (int, float)) else ""
        return [f"  (call {event.get('call')}: {u.get('input_tokens', 0):,} in, "
                f"{u.get('cache_read_tokens', 0):,} cache read, {u.get('cache_write_tokens', 0):,} "
                f"cache write, {u.get('output_tokens', 0):,} out{cost}; {event.get('stop_reason')})"]  # fmt: skip
    if kind in ("assistant", "user"):
        who = "claude" if kind == "assistant" else "user"
        sample = f" (sample {int(event.get('sample', 0)) + 1})" if event.get("sample") else ""
        out = []
        content = event.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            out.extend(_block_lines(block, who + sample, limit))
        return out
    if kind == "tool":
        result = str(event.get("result", ""))
        first = _head(result, 1 if limit else None)
        flag = " (error)" if event.get("is_error") else ""
        head = f"  -> {event.get('name')}{flag}: {first[0]}"
        return [head, *("     " + line for line in first[1:])]
    if kind == "version":
        head = "PASSED" if event.get("ok") else f"FAILED at {event.get('failed_rung')}"
        return [f"== version {event.get('version')}: {head} {event.get('reason', '')}".rstrip()]
    if kind == "retry":
        return [
            f"  ! retry {event.get('attempt')}: {event.get('error')} (waited {event.get('wait_s')} s)"
        ]
    if kind in ("nudge", "trim"):
        return [
            f"  [{kind}] "
            + json.dumps({k: v for k, v in event.items() if k not in ("type", "time", "text")})
        ]
    if kind == "stop":
        return [f"[stop] {event.get('reason')}: {event.get('detail', '')}"]
    if kind in ("note", "steer"):
        return [f"[engineer] {_steering_line(event)}"]
    if kind == "proof":
        from ..agent.recheck import Proof

        return [f"  [re-check] {Proof.from_json(event).engineer_line()}"]
    return []


def _head(text: str, limit: int | None) -> list[str]:
    lines = text.splitlines() or [""]
    if limit is None or len(lines) <= limit:
        return lines
    return [*lines[:limit], f"[... {len(lines) - limit} more lines]"]


def _block_lines(block: dict[str, Any], who: str, limit: int | None) -> list[str]:
    kind = block.get("type")
    if kind == "text":
        lines = _head(str(block.get("text", "")), limit)
        return [f"{who}: {lines[0]}", *("    " + line for line in lines[1:])]
    if kind == "thinking":
        return [f"{who} (thinking): {len(str(block.get('thinking', '')))} characters"]
    if kind == "tool_use":
        args = dict(block.get("input") or {})
        if isinstance(args.get("source"), str):
            source = args.pop("source")
            args["source"] = f"<{len(source.splitlines())} lines>"
        return [f"{who} -> {block.get('name')} {json.dumps(args, ensure_ascii=False)[:200]}"]
    if kind == "tool_result":
        content = block.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        lines = _head(text, 2 if limit else None)
        return [f"  <- result: {lines[0]}", *("     " + line for line in lines[1:])]
    return [f"{who}: [{kind}]"]


@runs_group.command("plot")
@click.argument("run")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="PNG to write (default: progress.png in the run's directory).")  # fmt: skip
@runs_dir_option
def plot_cmd(run: str, output: Path | None, runs_dir: Path | None) -> int:
    """Write a PNG of time and % of roofline per version (ladder progress on a CPU)."""
    from ..agent.plot import plot_run
    from ..agent.runs import RunRecord

    record = RunRecord.open(run, runs_dir)
    versions = [v for v in record.versions() if "ok" in v]
    summary = _summary(record)
    title = f"{summary.get('problem')} · {summary.get('backend')} · {summary.get('model')}"
    target = summary.get("target")
    notes = [int(n.get("after_version") or 0) for n in record.notes()]
    path = plot_run(versions, output or record.path / "progress.png", title=title,
                    target=target if isinstance(target, (int, float)) else None,
                    notes=notes)  # fmt: skip
    click.echo(str(path))
    return 0


# -- intra-kernel trace timelines: the command lives in trace.py ---------------
from .trace import trace_plot_cmd  # noqa: E402

runs_group.add_command(trace_plot_cmd)
