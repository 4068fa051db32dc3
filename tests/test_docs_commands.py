"""Every command the README and the guides in docs/ show either runs, or says why not.

The fenced ``bash``, ``sh`` and ``console`` blocks of README.md and docs/*.md are read.
A command is a line of a bash block (``\\``-continued lines joined), or a ``$ `` line of a
console block, or one part of such a line's pipeline or ``&&`` list, that starts with
``ctxkernel``, ``make`` or ``python``. Then:

- a block with no marker runs: each command, in-process, against a small index this
  module builds (the ``triton`` and ``cutlass`` corpora of a few files of the installed
  packages, named and laid out like the demo's index), from a scratch directory where
  ``examples/`` and ``bench/`` are the checkout's. It must exit 0, or the code its comment
  names (``# ... (exit 1)``). ``echo TEXT | ctxkernel ...`` gets TEXT on stdin; an output
  redirection is dropped (stdout is captured anyway);
- a block that cannot run offline on a CPU in a few seconds carries a marker, an HTML
  comment on the line right before its fence: ``<!-- needs: gpu, long -->`` (the names are
  ``NEEDS`` below). Its commands are only parsed: the subcommand exists and takes those
  arguments and options (click's parser, nothing invoked; paths need not exist), a make
  target exists in the Makefile, a python script compiles or a ``-m`` module is found.

A command in an unmarked block that cannot run here (a GPU, a placeholder path, a server)
fails, so the doc has to say why. A fenced block without a language that shows a command
fails too: tag it ``console`` or ``bash``. Relative links of these pages must reach a file
and, with ``#anchor``, a heading of it.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
from retrieval.conftest import CliResult
from retrieval.conftest import run_cli as run_cli  # fixture
from tools.conftest import demo_env

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# why a block's commands are parsed only; one of these must be true of every one of them
NEEDS = {
    "gpu": "a CUDA GPU",
    "network": "the internet: a clone, a download",
    "full-index": "corpora this test's small index lacks: the PTX ISA, the whole packages",
    "long": "more than a few seconds on a CPU: a full index, a build, the test suite",
    "api-key": "the Anthropic API: a key and the network",
    "service": "a server or client beside it: chroma, an SSH host, Ray, MCP, the check server",
    "own-files": "paths that stand for yours: a candidate, a run, a folder, a mirror",
}
PROGRAMS = ("ctxkernel", "make", "python", "python3")
SHELL_LISTS = {"|", "||", "&&", ";", "&"}
REDIRECTS = {">", ">>", "<", ">&", "&>"}
MARKER = re.compile(r"^<!--\s*needs:\s*(?P<names>[^>]*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
EXIT = re.compile(r"\bexit (\d+)\b")

# the few files of the installed packages the small index holds (what the docs' commands
# name: do_bench, tl.dot, make_tiled_copy, cute.make_layout), at the paths pkg: gives them
INDEX_FILES = {
    "triton": ("triton", "python/triton", ["testing.py", "language/core.py"]),
    "cutlass": ("cutlass", "python/CuTeDSL/cutlass", ["cute/core.py", "cute/atom.py"]),
}


@dataclass(frozen=True)
class Command:
    page: str
    line: int
    text: str  # as shown
    argv: tuple[str, ...]
    needs: tuple[str, ...]
    stdin: str | None = None
    runnable: str = ""  # why it cannot run as written ("" when it can)
    exit_code: int = 0

    @property
    def id(self) -> str:
        shown = " ".join(self.argv)
        return f"{self.page}:{self.line}:{shown[:60]}"


@dataclass
class Block:
    page: str
    line: int  # of the opening fence
    lang: str
    lines: list[tuple[int, str]] = field(default_factory=list)
    needs: tuple[str, ...] = ()
    marker_error: str = ""


def read_blocks(path: Path) -> Iterator[Block]:
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text().splitlines()
    block: Block | None = None
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if block is not None:
            if fence and not fence.group("lang"):
                yield block
                block = None
            else:
                block.lines.append((number, line))
            continue
        if fence:
            block = Block(rel, number, fence.group("lang"))
            before = lines[number - 2] if number > 1 else ""
            marker = MARKER.match(before)
            if marker:
                names = tuple(n.strip() for n in marker.group("names").split(",") if n.strip())
                unknown = [n for n in names if n not in NEEDS]
                block.needs = names
                if unknown or not names:
                    block.marker_error = f"unknown needs {unknown or names}: use {sorted(NEEDS)}"
        elif MARKER.match(line) and not FENCE.match(lines[number] if number < len(lines) else ""):
            yield Block(rel, number, "", marker_error="a needs marker must be right before a fence")
    assert block is None, f"{rel}:{block.line}: a fence is never closed"


def split_comment(line: str) -> tuple[str, str]:
    """The command and its comment: a ``#`` at a word's start, outside quotes."""
    quote, i = "", 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and quote != "'":
            i += 2  # an escaped character is never a quote or a comment
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
        i += 1
    return line.rstrip(), ""


def command_lines(block: Block) -> Iterator[tuple[int, str]]:
    """(line number, text) of each command line of a block, continuations joined."""
    if block.lang == "console":
        for number, line in block.lines:
            if line.startswith("$ "):
                yield number, line[2:]
        return
    pending: tuple[int, str] | None = None
    for number, raw in block.lines:
        line = raw.strip()
        if pending is None and (not line or line.startswith("#")):
            continue
        start, text = pending if pending is not None else (number, "")
        if line.endswith("\\"):
            pending = (start, text + line[:-1] + " ")
            continue
        pending = None
        yield start, text + line


def commands(block: Block) -> Iterator[Command]:
    for number, line in command_lines(block):
        code, comment = split_comment(line)
        lexer = shlex.shlex(code, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
        segments: list[tuple[str, list[str], str]] = []  # (operator before, words, after)
        before, words = "", list[str]()
        for token in tokens:
            if token in SHELL_LISTS:
                segments.append((before, words, token))
                before, words = token, []
            else:
                words.append(token)
        segments.append((before, words, ""))
        exit_match = EXIT.search(comment)
        for i, (op_before, words, op_after) in enumerate(segments):
            if not words or words[0] not in PROGRAMS:
                continue
            argv, why = [], []
            skip = False
            for token in words:
                if skip:
                    skip = False
                elif token in REDIRECTS:
                    skip = True  # stdout is captured; nothing is written beside the docs
                else:
                    argv.append(token)
            stdin = None
            if op_before == "|":
                feeder = segments[i - 1][1]
                if feeder[:1] == ["echo"]:
                    stdin = " ".join(feeder[1:]) + "\n"
                else:
                    why.append(f"its input comes from {' '.join(feeder)!r}")
            if op_after == "&":
                why.append("it runs in the background (a server)")
            if op_after == "|":
                why.append("its output goes to another command")
            yield Command(
                block.page,
                number,
                line,
                tuple(argv),
                block.needs,
                stdin,
                "; ".join(why),
                int(exit_match.group(1)) if exit_match else 0,
            )


BLOCKS = [b for page in PAGES for b in read_blocks(page)]
CHECKED = [b for b in BLOCKS if b.lang in ("bash", "sh", "console")]
COMMANDS = [c for b in CHECKED for c in commands(b)]
RUN = [c for c in COMMANDS if not c.needs]
PARSE = [c for c in COMMANDS if c.needs]


def test_the_pages_show_commands() -> None:
    """The collection itself works: the README and each guide page are read, with commands
    of both kinds (a regression here would make every other test here vacuous)."""
    assert {p.name for p in PAGES} >= {
        "README.md",
        "retrieval.md",
        "harness.md",
        "agent.md",
        "operations.md",
    }
    assert len(RUN) >= 15 and len(PARSE) >= 20
    assert any(c.argv[:2] == ("ctxkernel", "check") for c in RUN)
    assert any(c.stdin for c in RUN)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: f"{b.page}:{b.line}")
def test_markers_and_fences(block: Block) -> None:
    """Markers name known needs and sit right before a fence of commands; a command is
    never hidden in an untagged block, where nothing would check it."""
    assert not block.marker_error, f"{block.page}:{block.line}: {block.marker_error}"
    if block.lang in ("bash", "sh", "console"):
        if block.needs:
            assert list(commands(block)), (
                f"{block.page}:{block.line}: a needs marker on a block with no "
                f"{'/'.join(PROGRAMS)} command to check"
            )
        return
    for number, line in block.lines:
        shown = line.strip().removeprefix("$ ")
        assert not (line.strip().startswith("$ ") or shown.split(" ")[0] in PROGRAMS), (
            f"{block.page}:{number}: a command in a block tagged {block.lang or 'nothing'!r}: "
            "tag it console (or bash) so this test runs or parses it"
        )


# -- real runs ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def docs_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small index named like the demo's: corpora ``triton`` and ``cutlass`` (their
    built-in definitions) on a few files of the installed packages."""
    import cutlass
    import triton

    from ctxkernel import Workspace

    base = tmp_path_factory.mktemp("docs-index")
    home = base / "home"
    home.mkdir()
    sources: dict[str, Path] = {}
    for corpus, (module, prefix, files) in INDEX_FILES.items():
        package = Path({"triton": triton, "cutlass": cutlass}[module].__file__ or "").parent
        root = base / "src" / corpus
        for rel in files:
            target = root / prefix / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(package / rel, target)
        sources[corpus] = root
    with pytest.MonkeyPatch.context() as mp:
        for key, value in demo_env(home, base).items():
            mp.setenv(key, value)
        mp.delenv("CTXKERNEL_CHROMA_URL", raising=False)
        ws = Workspace(base / "index")
        for corpus, root in sources.items():
            ws.index(corpus, source=f"dir:{root}")
    return base / "index"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the commands run: the checkout's examples and bench, nothing to write into."""
    where = tmp_path_factory.mktemp("docs-cwd")
    for name in ("examples", "bench"):
        (where / name).symlink_to(ROOT / name, target_is_directory=True)
    return where


_RESULTS: dict[tuple[tuple[str, ...], str | None], CliResult] = {}


def run_command(
    cmd: Command, run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> CliResult:
    """Run it once per session (the same command shown twice runs once)."""
    key = (cmd.argv, cmd.stdin)
    if key in _RESULTS:
        return _RESULTS[key]
    if cmd.argv[0] == "ctxkernel":
        if cmd.stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(cmd.stdin))
        result = run_cli(*cmd.argv[1:])
    else:
        program = [sys.executable] if cmd.argv[0].startswith("python") else ["make"]
        proc = subprocess.run(
            [*program, *cmd.argv[1:]],
            input=cmd.stdin,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            env=dict(os.environ),
        )
        result = CliResult(proc.returncode, proc.stdout, proc.stderr)
    _RESULTS[key] = result
    return result


@pytest.mark.parametrize("cmd", RUN, ids=lambda c: c.id)
def test_command_runs(
    cmd: Command,
    docs_index: Path,
    workdir: Path,
    run_cli: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An unmarked command runs offline on a CPU and exits as the doc says."""
    assert not cmd.runnable, (
        f"{cmd.page}:{cmd.line}: `{cmd.text}` cannot run here ({cmd.runnable}): "
        f"mark its block <!-- needs: ... --> with one of {sorted(NEEDS)}"
    )
    monkeypatch.setenv("CTXKERNEL_INDEX_DIR", str(docs_index))
    monkeypatch.chdir(workdir)
    result = run_command(cmd, run_cli, monkeypatch)
    assert result.code == cmd.exit_code, (
        f"{cmd.page}:{cmd.line}: `{cmd.text}` exited {result.code}, the doc says "
        f"{cmd.exit_code} (a command that cannot run offline on a CPU in a few seconds "
        f"needs a marker <!-- needs: ... -->)\nstderr: {result.err[-2000:]}\n"
        f"stdout: {result.out[-1000:]}"
    )
    if cmd.exit_code == 0:
        assert result.out.strip(), f"{cmd.page}:{cmd.line}: `{cmd.text}` printed nothing"


# -- parse-only checks -------------------------------------------------------------------


def parse_ctxkernel(args: list[str]) -> list[str]:
    """The command path ``args`` reach, parsed by click as the real CLI would, with no
    callback invoked; paths need not exist (they stand for the reader's)."""
    from ctxkernel.cli import cli

    ctx = cli.make_context("ctxkernel", list(args))
    command: click.Command = cli
    path = ["ctxkernel"]
    while isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not rest and command.invoke_without_command:
            return path
        assert rest, f"`{' '.join(path)}` needs a subcommand"
        name, sub, rest = command.resolve_command(ctx, rest)
        assert name is not None and sub is not None
        ctx = sub.make_context(name, rest, parent=ctx)
        command, path = sub, [*path, name]
    assert not ctx.args, f"`{' '.join(path)}` takes no extra arguments {ctx.args}"
    return path


@pytest.fixture
def paths_need_not_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    convert = click.Path.convert

    def lenient(self: click.Path, value: object, param: object, ctx: object) -> object:
        exists, self.exists = self.exists, False
        try:
            return convert(self, value, param, ctx)  # type: ignore[arg-type]
        finally:
            self.exists = exists

    monkeypatch.setattr(click.Path, "convert", lenient)


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+):", text, flags=re.M))


@pytest.mark.parametrize("cmd", PARSE, ids=lambda c: c.id)
def test_marked_command_parses(cmd: Command, paths_need_not_exist: None) -> None:
    """A marked command is one the CLI would accept: subcommand, arguments and options."""
    where = f"{cmd.page}:{cmd.line}: `{cmd.text}`"
    program, *args = cmd.argv
    if program == "ctxkernel":
        try:
            parse_ctxkernel(args)
        except click.ClickException as exc:
            pytest.fail(f"{where}: {exc.format_message()}")
    elif program == "make":
        missing = [a for a in args if not a.startswith("-") and a not in make_targets()]
        assert not missing, f"{where}: no such Makefile target {missing}"
    else:
        if args[:1] == ["-m"]:
            import importlib.util

            assert importlib.util.find_spec(args[1]) is not None, f"{where}: no module"
        else:
            script = ROOT / args[0]
            assert script.is_file(), f"{where}: no such script"
            compile(script.read_text(), str(script), "exec")


# -- links -------------------------------------------------------------------------------

LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, fenced = set(), False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"
