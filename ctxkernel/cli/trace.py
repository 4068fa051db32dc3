"""``ctxkernel runs trace-plot RUN``: draw the ``trace`` rung's timeline as a PNG.

RUN is a ``*.trace.json`` file (or any Chrome trace, Proton's ``.chrome_trace`` too), a
check record directory (``runs/<problem>/<stamp>-<hash>/``), part of a check record's
name, or an agent run (id, unique part, ``last`` or directory: its newest version whose
check kept a timeline). Registered on the ``runs`` group by ``runs.py``; the drawing is
``harness.tracing.plot`` (matplotlib, Agg, imported only here).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..errors import UserError

TRACE_GLOB = "*.trace.json"


def _traces_in(folder: Path) -> list[Path]:
    return sorted(folder.glob(TRACE_GLOB))


def _from_agent_run(folder: Path) -> list[Path]:
    versions = folder / "versions"
    if not versions.is_dir():
        return []
    numbered = sorted(
        (p for p in versions.iterdir() if p.name.isdigit()), key=lambda p: -int(p.name)
    )
    for version in numbered:
        found = _traces_in(version)
        if found:
            return found
        try:
            verdict: Any = json.loads((version / "verdict.json").read_text())
        except (OSError, json.JSONDecodeError):
            continue
        run_dir = verdict.get("run_dir") if isinstance(verdict, dict) else None
        if run_dir and Path(run_dir).is_dir():
            found = _traces_in(Path(run_dir))
            if found:
                return found
    return []


def find_traces(run: str, runs_dir: Path | None = None) -> list[Path]:
    """The timeline files RUN names (see the module docstring); raises ``UserError``."""
    given = Path(run)
    if given.is_file():
        return [given]
    if given.is_dir():
        found = _traces_in(given) or _from_agent_run(given)
        if found:
            return found
        raise UserError(f"{given} holds no {TRACE_GLOB} (was it checked with --trace on a GPU?)")
    from harness import paths

    base = runs_dir or paths.default_runs_dir()
    try:
        from ..agent.runs import resolve_run

        found = _from_agent_run(resolve_run(run, runs_dir))
        if found:
            return found
    except UserError:
        pass
    records = sorted(
        (d for d in base.glob("*/*") if d.is_dir() and run in d.name and _traces_in(d)),
        key=lambda d: d.name,
    )
    if records:
        return _traces_in(records[-1])
    raise UserError(
        f"no trace timeline found for {run!r} (a *.trace.json, a check record folder, or an "
        "agent run whose checks ran with --trace)"
    )


@click.command("trace-plot")
@click.argument("run")
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="PNG to write (default: beside the timeline, same name with .png).",
)
@click.option("--rows", type=click.IntRange(1, 512), default=64, show_default=True,
              help="Most warp/CTA rows drawn (an even sample beyond).")  # fmt: skip
@click.option("--width", type=click.IntRange(300, 8000), default=1400, show_default=True,
              help="Width in pixels.")  # fmt: skip
@click.option(
    "--runs-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Where runs live (default: runs/ under CTXKERNEL_HOME or the checkout).",
)
def trace_plot_cmd(
    run: str, output: Path | None, rows: int, width: int, runs_dir: Path | None
) -> int:
    """Render the intra-kernel trace of RUN (a `check --trace` timeline) as a PNG:
    sections as coloured bars, one row per warp (or CTA). Prints the PNG paths.

    \b
    Examples:
      ctxkernel runs trace-plot runs/matmul_bf16/20261130-101500-3f2a91c0
      ctxkernel runs trace-plot last -o trace.png
      ctxkernel runs trace-plot proton.chrome_trace
    """
    from harness.tracing.plot import plot_timeline

    traces = find_traces(run, runs_dir)
    if output is not None and len(traces) > 1:
        names = ", ".join(t.name for t in traces)
        raise UserError(f"{len(traces)} timelines found ({names}); -o takes one: pass the file")
    for trace in traces:
        target = output or trace.with_name(trace.name.removesuffix(".json") + ".png")
        title = _title(trace)
        try:
            path = plot_timeline(trace, target, title=title, width_px=width, max_rows=rows)
        except ValueError as exc:
            raise UserError(f"{trace}: {exc}") from None
        click.echo(str(path))
    return 0


def _title(path: Path) -> str:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return path.name
    other = doc.get("otherData", {}).get("ctxkernel", {}) if isinstance(doc, dict) else {}
    bits = [str(other[k]) for k in ("problem", "candidate", "shape") if other.get(k)]
    backend = other.get("backend")
    if backend:
        bits.append(f"{backend}, {other.get('granularity', '?')} records")
    return " · ".join(bits) or path.name
