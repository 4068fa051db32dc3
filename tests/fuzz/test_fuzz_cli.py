"""Fuzz every CLI command's arguments (every command and subcommand, every option, read
from click itself): undecodable bytes (as Python passes them in argv), lone surrogates,
huge and empty values, numbers out of range. No traceback, no escaped exception; exit 0,
1 or 2, and exit 2 comes with one error line on stderr; nothing is written outside the
index, runs and cache folders of the sandbox (its home and cwd are listed before and after).

Bounded for a 2-core CI: a fixed number of examples per command, no example database.
`mcp` serves until its client leaves, so it is fuzzed in subprocesses with bad values only.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxkernel.cli import cli

from .conftest import Run, Sandbox

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("CTXKERNEL_FUZZ_EXAMPLES", "15"))
# mcp serves stdio or HTTP until stopped; embedder build distils a model (minutes for the
# default recipe, each time with --force): see the subprocess cases
IN_PROCESS_SKIP = {("mcp",), ("embedder", "build"), ("check-server", "serve")}  # serve: blocks

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# values that reach deeper than random text: names that exist, ids, paths, numbers
KNOWN = [
    "demo", "triton", "ptx", "cutlass", "make_tiled_copy", "tl.dot", ".reqntid",
    "demo:src/kernels.py:1-3", "demo:include/copy.hpp", "demo:../../etc/passwd", "last",
    "0", "-1", "3", "1e309", "nan", "-", "--", ".", "/", "{}", '{"query": 1}', "(a+)+$",
    "json", "anthropic", "mcp", "text", "hybrid", "lexical",
]  # fmt: skip


def _undecodable(raw: bytes) -> str:
    return os.fsdecode(raw)  # what Python makes of argv bytes that are not UTF-8


VALUES = st.one_of(
    # names that exist reach past the first check: drawn about a third of the time
    st.sampled_from(KNOWN),
    st.sampled_from(KNOWN),
    st.sampled_from(KNOWN),
    st.text(max_size=16),
    st.binary(min_size=1, max_size=12).map(_undecodable),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.just(""),
    st.integers(min_value=300, max_value=5_000).map(lambda n: "x" * n),  # past NAME_MAX, PATH_MAX
    st.just("y" * 100_000),
    st.integers().map(str),
)


def _commands() -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = []

    def walk(path: tuple[str, ...], group: click.Group) -> None:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if cmd is None:
                continue
            found.append(((*path, name), cmd))
            if isinstance(cmd, click.Group):
                walk((*path, name), cmd)

    walk((), cli)
    return found


COMMANDS = _commands()


def _argv(path: tuple[str, ...], cmd: click.Command) -> st.SearchStrategy[list[str]]:
    arguments = [p for p in cmd.params if isinstance(p, click.Argument)]
    options = [
        p for p in cmd.params if isinstance(p, click.Option) and p.name not in ("help", "version")
    ]

    @st.composite
    def build(draw: st.DrawFn) -> list[str]:
        argv = list(path)
        for arg in arguments:
            count = (
                draw(st.integers(0, 2))
                if arg.nargs == -1
                else (1 if arg.required else draw(st.integers(0, 1)))
            )
            argv += [draw(VALUES) for _ in range(count)]
        required = [o for o in options if o.required]
        chosen = (
            draw(st.lists(st.sampled_from(options), max_size=4, unique_by=id)) if options else []
        )
        for opt in required + [o for o in chosen if not o.required]:
            name = draw(st.sampled_from(opt.opts))
            if opt.is_flag:
                argv.append(name)
                continue
            choices = list(opt.type.choices) if isinstance(opt.type, click.Choice) else []
            value = (
                draw(st.sampled_from([str(c) for c in choices]) | VALUES)
                if choices
                else draw(VALUES)
            )
            argv += [name, value]
        return argv

    return build()


def _check(run: Run, argv: list[str]) -> None:
    shown = [a[:60] for a in argv]
    assert "Traceback" not in run.err and "Traceback" not in run.out, (shown, run.err[-2000:])
    assert run.code in (0, 1, 2), (shown, run.code, run.err[-500:])
    if run.code == 2 and not run.err.strip() and "--json" in argv:
        # `tools run --json` reports a failed call as its JSON result
        assert json.loads(run.out.splitlines()[-1])["is_error"] is True, (shown, run.out[:300])
        return
    if run.code == 2:
        lines = [line for line in run.err.strip().splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ctxkernel: error: ")]
        assert len(errors) == 1 and lines[-1] == errors[0], (shown, run.err[-1000:])
        # anything before it is `index`'s stage lines, never a second error or a dump
        assert all(line.startswith("ctxkernel: ") for line in lines), (shown, lines[:5])


DIR_OPTIONS = ("--index-dir", "--runs-dir")  # where a command is told to write


def _given_dirs(argv: list[str], cwd: Path) -> tuple[Path, ...]:
    dirs = []
    for flag, value in itertools.pairwise(argv):
        if flag in DIR_OPTIONS and value and "\0" not in value and len(value) < 200:
            try:
                value.encode("utf-8")  # the CLI refuses anything else before writing
            except UnicodeEncodeError:
                continue
            dirs.append(cwd / value)
    return tuple(dirs)


def _fuzz_id(item: tuple[tuple[str, ...], click.Command]) -> str:
    return " ".join(item[0])


@pytest.mark.parametrize(
    ("path", "cmd"),
    [c for c in COMMANDS if c[0] not in IN_PROCESS_SKIP],
    ids=[_fuzz_id(c) for c in COMMANDS if c[0] not in IN_PROCESS_SKIP],
)
def test_fuzz_cli_arguments(
    sandbox: Sandbox,
    run_main: Callable[[list[str]], Run],
    path: tuple[str, ...],
    cmd: click.Command,
) -> None:
    @FUZZ
    @given(argv=_argv(path, cmd))
    def one(argv: list[str]) -> None:
        given_dirs = _given_dirs(argv, sandbox.root / "cwd")
        new_dirs = [d for d in given_dirs if not d.exists()]
        before = sandbox.files(given_dirs)
        run = run_main(argv)
        if os.environ.get("CTXKERNEL_FUZZ_LOG"):
            with open(os.environ["CTXKERNEL_FUZZ_LOG"], "a") as log:
                log.write(f"{run.code} {[a[:30] for a in argv]!a} {run.err.strip()[-100:]!a}\n")
        _check(run, argv)
        after = sandbox.files(given_dirs)
        written = {k for k in set(after) | set(before) if before.get(k) != after.get(k)}
        assert not written, ([a[:60] for a in argv], sorted(written)[:10])
        # an index made where the example asked is its own: gone before the next one
        if any(d.exists() for d in new_dirs):
            gc.collect()  # closes what still holds its SQLite files
            for d in new_dirs:
                shutil.rmtree(d, ignore_errors=True)

    one()


def test_every_command_is_fuzzed() -> None:
    names = {p[0] for p, _ in COMMANDS}
    assert {"index", "update", "corpora", "search", "grep", "show", "docs", "tools", "mcp",
            "agent", "check", "eval", "runs", "context"} <= names  # fmt: skip
    assert ("tools", "run") in {p for p, _ in COMMANDS}


@pytest.mark.parametrize(
    "argv",
    [
        [b"search", b"\xff\xfe"],
        [b"docs", b"wgmma.\xc3"],
        [b"grep", b"\x80+", b"--corpus", b"demo"],
        [b"tools", b"run", b"docs", b"--args", b'{"topic": "\\ud800"}'],
        [b"mcp", b"--port", b"\xff"],
        [b"mcp", b"--log-level", b"loud"],
        [b"index", b"x" * 100_000],
        [b"embedder", b"build", b"--recipe", b"\xff"],
    ],
    ids=[
        "search",
        "docs",
        "grep",
        "tools-run-surrogate",
        "mcp-port",
        "mcp-log-level",
        "index-huge",
        "embedder-build-recipe",
    ],
)
def test_fuzz_cases_in_a_real_process(sandbox: Sandbox, argv: list[bytes]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = sandbox.files()
    proc = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"ctxkernel", *argv],
        capture_output=True, env=env, cwd=sandbox.root / "cwd", timeout=180,
    )  # fmt: skip
    err = proc.stderr.decode("utf-8", "replace")
    run = Run(proc.returncode, proc.stdout.decode("utf-8", "replace"), err)
    _check(run, [os.fsdecode(a) for a in argv])
    if argv[:2] == [b"tools", b"run"]:
        # a lone surrogate inside the JSON reaches the tool: an error result, exit 2
        assert proc.returncode == 2 and "not valid UTF-8" in err
    else:
        assert proc.returncode == 2
    assert sandbox.files() == before
    json.dumps(run.err)  # what was printed is text
