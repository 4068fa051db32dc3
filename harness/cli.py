"""``python -m harness check PROBLEM CANDIDATE``: the harness's own command line.

``ctxkernel check`` (``ctxkernel/cli/check.py``) reuses ``check_options`` and
``execute_check``. Output: the rung ladder one line per rung, then the verdict; ``--json``
prints one JSON document (``type: "verdict"``); ``--feedback`` prints the LLM feedback.
Exit 0 when every rung passed, 1 when the verdict is a failure, 2 on a usage error.
Several candidates (or ``--runner``/``--jobs``/``--resume``) go to
``harness.runners.batchcli.execute_batch``: checked concurrently, one line (or JSON
document) each, then a summary.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import UsageError


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


def check_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The click arguments and options of ``check``, shared by both command lines."""
    import click

    from .backends import backend_names

    decorators = [
        click.argument("problem", type=click.Path(path_type=Path)),
        click.argument("candidates", nargs=-1, type=click.Path(path_type=Path)),
        click.option(
            "--json", "as_json", is_flag=True, help="Print one JSON document (type 'verdict')."
        ),
        click.option(
            "--feedback",
            is_flag=True,
            help="Print the compact feedback for an LLM instead of the ladder.",
        ),
        click.option(
            "--device",
            type=click.Choice(["cpu", "cuda"]),
            default=None,
            help="Default: cuda if available, else cpu (Triton interpreter).",
        ),
        click.option(
            "--shapes",
            multiple=True,
            help="Shapes to check instead of the problem's SHAPES: 'n=1000,m=3;n=17', or 'bench'.",
        ),
        click.option(
            "--seeds",
            "trials",
            type=click.IntRange(1, 100),
            default=3,
            show_default=True,
            help="Trials (fresh seeded inputs) per shape.",
        ),
        click.option(
            "--timeout",
            "timeout_s",
            type=click.FloatRange(0.1),
            default=30.0,
            show_default=True,
            help="Seconds allowed per worker request.",
        ),
        click.option(
            "--backend",
            type=click.Choice(backend_names()),
            default=None,
            help="Declare the candidate's backend.",
        ),
        click.option(
            "--runs-dir",
            type=click.Path(path_type=Path),
            default=None,
            help="Where run records go (default: runs/).",
        ),
        click.option("--no-record", is_flag=True, help="Do not keep a run record."),
        # -- several candidates (harness/runners) --
        click.option(
            "--runner",
            default=None,
            metavar="SPEC",
            help="Where checks run: local, pool, ssh://user@host[:port][?...], ray, ray://host:port "
            "(default: pool for several candidates, else local).",
        ),
        click.option(
            "--jobs",
            type=click.IntRange(1),
            default=None,
            help="Concurrent checks: pool slots (default one per GPU), threads, SSH sessions.",
        ),
        click.option(
            "--resume",
            default=None,
            metavar="BATCH",
            help="Resume a batch (its id or manifest path); finished candidates are not re-checked.",
        ),
    ]
    fn = perf_options(fn)
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


# -- performance flags (issue 5): benchmark + roofline, dumps, profile -----------------


def perf_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--bench``, ``--dump DIR``, ``--target``, ``--profile`` and their knobs."""
    import click

    decorators = [
        click.option(
            "--bench",
            is_flag=True,
            help="Time the candidate and the reference on BENCH_SHAPES; report the roofline.",
        ),
        click.option(
            "--bench-budget",
            "bench_budget_s",
            type=click.FloatRange(0.1),
            default=3.0,
            show_default=True,
            help="Seconds of timing per shape and subject (stops earlier at a 1% CI).",
        ),
        click.option(
            "--l2",
            "bench_l2",
            type=click.Choice(["flush", "hot"]),
            default=None,
            help="L2 flushed before every timed call (default) or left hot.",
        ),
        click.option(
            "--graph",
            "bench_graph",
            is_flag=True,
            help="Time replays of a CUDA graph of the call instead of plain calls.",
        ),
        click.option(
            "--compile-ref", is_flag=True, help="Also time torch.compile of the reference."
        ),
        click.option(
            "--dump",
            "dump_dir",
            type=click.Path(path_type=Path, file_okay=False),
            default=None,
            help="Write IR/PTX/CUBIN/SASS and a resource report per kernel version here.",
        ),
        click.option(
            "--target",
            default=None,
            help="Compile Triton kernels ahead of time for this target (e.g. sm_90); no GPU needed.",
        ),
        click.option("--profile", is_flag=True, help="Profile the candidate's kernels with ncu."),
        # intra-kernel tracing (issue 8): harness/rungs/trace.py
        click.option(
            "--trace",
            is_flag=True,
            help="Time the sections the kernel marks (Proton scopes, ck_trace) in a separate "
            "instrumented worker; writes a Perfetto timeline into the run record.",
        ),
    ]
    for decorator in reversed(decorators):
        fn = decorator(fn)
    return fn


def perf_run_options(perf: dict[str, Any]) -> dict[str, Any]:
    """The ``RunOptions`` fields the performance flags set."""
    out: dict[str, Any] = {
        key: perf[key]
        for key in (
            "bench",
            "bench_budget_s",
            "bench_l2",
            "compile_ref",
            "dump_dir",
            "target",
            "profile",
            "trace",
        )
        if key in perf
    }
    if perf.get("bench_graph"):
        out["bench_mode"] = "graph"
    if out.get("target"):
        from .backends import parse_target

        try:
            parse_target(str(out["target"]))
        except ValueError as exc:
            raise UsageError(f"--target: {exc}") from None
    return out


def execute_check(
    problem: Path,
    candidates: Sequence[Path] | Path = (),
    as_json: bool = False,
    feedback: bool = False,
    device: str | None = None,
    shapes: tuple[str, ...] = (),
    trials: int = 3,
    timeout_s: float = 30.0,
    backend: str | None = None,
    runs_dir: Path | None = None,
    no_record: bool = False,
    runner: str | None = None,
    jobs: int | None = None,
    resume: str | None = None,
    echo: Callable[[str], None] | None = None,
    **perf: Any,
) -> int:
    """Run one check and print it; returns the exit code. Raises ``UsageError``."""
    from .candidate import load_candidate
    from .problem import load_problem
    from .runner import LocalRunner, RunOptions

    out = echo or (lambda text: print(text, flush=True))
    from .runners.batchcli import is_remote

    paths = [candidates] if isinstance(candidates, Path) else list(candidates)
    loaded = load_problem(problem)
    if device == "cuda" and not is_remote(runner):
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is available here")
    chosen_shapes = (
        loaded.bench_shapes
        if tuple(s.strip() for s in shapes) == ("bench",)
        else parse_shapes(shapes)
    )
    if tuple(s.strip() for s in shapes) == ("bench",) and not chosen_shapes:
        raise UsageError(f"{loaded.name} has no BENCH_SHAPES")
    options = RunOptions(
        device=device,
        trials=trials,
        shapes=chosen_shapes,
        timeout_s=timeout_s,
        backend=backend,
        runs_dir=runs_dir,
        record=not no_record,
        **perf_run_options(perf),
    )
    if len(paths) != 1 or runner or jobs or resume:
        from .runners.batchcli import execute_batch

        return execute_batch(
            loaded, paths, options, runner, jobs, resume, as_json, feedback, echo=out
        )
    cand = load_candidate(paths[0], loaded, backend=backend)
    if not as_json and not feedback:
        from .backends import get_backend

        label = get_backend(cand.backend).device_label(options.resolved_device())
        print(
            f"checking {cand.path.name} against {loaded.name} ({loaded.format}) on {label}, backend {cand.backend}",
            file=sys.stderr,
        )
    verdict = LocalRunner().run(loaded, cand, options)
    if as_json:
        out(json.dumps(verdict.to_json()))
    elif feedback:
        out(verdict.feedback())
    else:
        for line in verdict.lines():
            out(line)
    return 0 if verdict.ok else 1


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
        return execute_check(**kwargs)

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
