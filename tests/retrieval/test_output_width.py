"""Piped or logged output is never hard-wrapped: hit ids, upstream URLs and `show` hints
come out whole, whatever their length; on a terminal rich uses the terminal's width and
still leaves them whole (the terminal folds long lines, it does not break them)."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from ctxkernel import Workspace

from .conftest import KERNEL_PY, CliResult, Repo, define_corpus

LONG_DIR = "src/" + "/".join(f"deeply_nested_folder_number_{i}" for i in range(5))
LONG_FILE = f"{LONG_DIR}/a_kernel_module_with_a_long_name.py"
BODY = "\n".join(
    [
        "def make_tiled_copy_with_a_rather_long_name(atom, thread_layout, value_layout):",
        '    """Build a tiled copy: the long name makes ids and URLs pass 80 columns."""',
    ]
    + [f"    step_{i} = atom + thread_layout * {i}" for i in range(30)]
    + ["    return step_0"]
)


@pytest.fixture(scope="module")
def long_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(index dir, upstream repo) of a corpus with a long path, indexed once."""
    base = tmp_path_factory.mktemp("long-paths")
    repo = git.Repo.init(base / "upstream", initial_branch="main")
    up = Repo(base / "upstream", repo)
    up.write("src/kernels.py", KERNEL_PY)
    up.write(LONG_FILE, BODY + "\n")
    up.commit("long paths")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CTXKERNEL_HOME", str(base / "home"))
        mp.setenv("XDG_CACHE_HOME", str(base / "cache"))
        define_corpus(base / "home", "demo", str(up.path))
        Workspace(base / "index").index("demo")
    return base / "index", up.path


@pytest.fixture
def long_paths(
    isolated_home: Path, long_index: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> Workspace:
    define_corpus(isolated_home, "demo", str(long_index[1]))
    monkeypatch.setenv("CTXKERNEL_INDEX_DIR", str(long_index[0]))
    return Workspace(long_index[0])


def _whole_in(text: str, needles: list[str]) -> None:
    lines = text.splitlines()
    assert any(len(needle) > 80 for needle in needles)
    for needle in needles:
        assert any(needle in line for line in lines), f"{needle!r} is not whole on one line"


@pytest.mark.parametrize(
    "args",
    [
        ("search", "make_tiled_copy_with_a_rather_long_name", "--mode", "lexical"),
        ("grep", "make_tiled_copy_with_a_rather_long_name", "--corpus", "demo"),
        ("show", f"demo:{LONG_FILE}:1-3"),
        ("docs", "make_tiled_copy_with_a_rather_long_name"),
    ],
)
def test_piped_output_never_wraps_urls_or_ids(
    long_paths: Workspace, run_cli: Callable[..., CliResult], args: tuple[str, ...]
) -> None:
    res = run_cli(*args)
    assert res.code == 0, res.err
    data = [json.loads(line) for line in run_cli(*args, "--json").out.splitlines()]
    if args[0] == "docs":
        data = [data[0]["best"]]
    ids = [d["id"] for d in data if d.get("type") in ("hit", "file")]
    urls = [d["url"] for d in data if d.get("url")]
    assert ids and urls
    _whole_in(res.out, ids + urls)
    # no line is cut at the old 80-column width either
    assert any(len(line) > 100 for line in res.out.splitlines())


def test_show_hint_is_whole_when_piped(
    long_paths: Workspace, run_cli: Callable[..., CliResult]
) -> None:
    res = run_cli("search", "make_tiled_copy_with_a_rather_long_name", "--lines", "2")
    hints = [line for line in res.out.splitlines() if "more lines (ctxkernel show " in line]
    assert hints
    for hint in hints:
        ref = re.search(r"ctxkernel show (\S+)\)$", hint)
        assert ref, hint
        assert run_cli("show", ref.group(1)).code == 0


def test_terminal_output_keeps_urls_whole_at_the_terminal_width(long_paths: Workspace) -> None:
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxkernel", "docs", "make_tiled_copy_with_a_rather_long_name"],
        stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env,
    )  # fmt: skip
    os.close(follower)
    seen = b""
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        seen += data
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    plain = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]|\x1b\]8;[^\x1b]*\x1b\\\\", "", seen.decode())
    url = "https://example.invalid/blob/"
    line = next(ln for ln in plain.splitlines() if url in ln)
    assert line.strip().endswith("#L1-L33"), line  # the whole URL on one line
    # the rule drawn under the title is the terminal's width, not 80 columns
    rule = next(ln for ln in plain.splitlines() if "─" in ln)
    assert len(rule.strip()) == 100
