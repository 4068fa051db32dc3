"""grep's time limit holds in every mode: ripgrep, the Python engine (what a plain install
has) and the chunk texts (files not on this machine), from the CLI and the agent tool,
with patterns that backtrack exponentially in a Python regex engine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import git
import pytest

from ctxkernel import Workspace, grep
from ctxkernel.tools import ToolSet

from .conftest import CliResult, define_corpus

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 2.0
MARGIN = 2.0  # generous, for a loaded 2-core machine; the engines stop at the deadline
# the pattern from the bug report, and ones that no Python engine escapes on these lines
PATTERNS = [r"((\w+\s?))+$", r"(\w|\w)+$", r"^(a|a)*$"]
LINE = "a" * 40 + "!"


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """An index of a corpus whose lines make backtracking engines explode."""
    base = tmp_path_factory.mktemp("grep-deadline")
    home = base / "home"
    home.mkdir()
    up = base / "upstream"
    repo = git.Repo.init(up, initial_branch="main")
    (up / "src").mkdir()
    (up / "src" / "lines.py").write_text(
        "\n".join([LINE] * 50 + ["def found_me():", "    pass"]) + "\n"
    )
    repo.git.add(A=True)
    repo.index.commit("slow")
    env = {"CTXKERNEL_HOME": str(home), "XDG_CACHE_HOME": str(base / "cache"),
           "XDG_CONFIG_HOME": str(base / "config")}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        define_corpus(home, "slow", str(up))
        Workspace(base / "index").index("slow")
    yield base / "index", home, env


@pytest.fixture
def slow_ws(slow: tuple[Path, Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> Workspace:
    for key, value in slow[2].items():
        monkeypatch.setenv(key, value)
    return Workspace(slow[0])


@pytest.fixture
def chunks_only(slow_ws: Workspace) -> Iterator[Workspace]:
    """The same index with its files gone from this machine (a moved clone)."""
    entry = slow_ws.store.cache("slow").file("src/lines.py")
    assert entry is not None and entry.local
    clone = Path(entry.local).parents[1]
    away = clone.with_name(clone.name + ".away")
    clone.rename(away)
    yield slow_ws
    away.rename(clone)


def _timed(fn: Callable[[], object]) -> tuple[object, float]:
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("engine", ["rg", "python"])
def test_grep_timeout_holds_with_nested_quantifiers(
    slow_ws: Workspace, engine: str, pattern: str
) -> None:
    result, took = _timed(
        lambda: slow_ws.grep("slow", pattern, engine=engine, time_limit_s=TIMEOUT)
    )
    assert took < TIMEOUT + MARGIN, (engine, pattern, took)
    assert isinstance(result, grep.GrepResult) and result.engine == engine
    if engine == "python" and pattern != PATTERNS[0]:
        assert result.truncated == f"time limit ({TIMEOUT:g} s)"


@pytest.mark.parametrize("pattern", PATTERNS)
def test_grep_timeout_holds_on_chunk_texts(chunks_only: Workspace, pattern: str) -> None:
    result, took = _timed(lambda: chunks_only.grep("slow", pattern, time_limit_s=TIMEOUT))
    assert took < TIMEOUT + MARGIN, (pattern, took)
    assert isinstance(result, grep.GrepResult) and result.engine == "chunks"
    if pattern != PATTERNS[0]:
        assert result.truncated == f"time limit ({TIMEOUT:g} s)"


def test_grep_without_ripgrep_uses_the_python_engine_within_the_limit(
    slow_ws: Workspace, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., CliResult]
) -> None:
    monkeypatch.setattr(grep, "find_rg", lambda: None)  # a plain `pip install ctxkernel`
    (res, took) = _timed(
        lambda: run_cli(
            "grep",
            r"(\w|\w)+$",
            "--corpus",
            "slow",
            "--timeout",
            str(TIMEOUT),
            "--index-dir",
            str(slow_ws.store.index_dir),
            "--json",
        )
    )
    assert took < TIMEOUT + MARGIN
    assert isinstance(res, CliResult) and res.code == 2  # a partial result is an error
    summary = json.loads(res.out.splitlines()[-1])
    assert summary["engine"] == "python" and summary["truncated"] == "time limit (2 s)"
    # what is found before the limit still comes back
    found = run_cli("grep", "found_me|(a|a)*!$", "--corpus", "slow", "--timeout", "30",
                    "--index-dir", str(slow_ws.store.index_dir), "--json")  # fmt: skip
    assert found.code == 0 and json.loads(found.out.splitlines()[0])["path"] == "src/lines.py"


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_grep_stopped_by_its_time_limit_exits_2_not_1_and_says_how_much_it_found(
    slow_ws: Workspace, run_cli: Callable[..., CliResult], engine: str
) -> None:
    """Exit 1 says "nothing found"; a grep the time limit stopped found a part of the
    answer (maybe nothing yet): exit 2, the partial count on one stderr line, and in
    --json a summary record that says the result is not complete."""
    args = ("grep", "found_me|^(a|a)*$", "--corpus", "slow", "--timeout", "0.3", "--engine",
            engine, "--index-dir", str(slow_ws.store.index_dir))  # fmt: skip
    for _ in range(3):  # ripgrep may finish these 52 lines within the limit: force the stop
        res = run_cli(*args, "--json")
        summary = json.loads(res.out.splitlines()[-1])
        if summary["truncated"]:
            break
        args = (*args[:5], "0.001", *args[6:])
    assert summary["type"] == "summary" and summary["truncated"].startswith("time limit")
    assert res.code == 2 and summary["complete"] is False
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.err, res.err
    blocks = summary["hits"]
    assert f"a partial result of {blocks} block" in lines[0] and "--timeout" in lines[0]
    plain = run_cli(*args)
    lines = plain.err.strip().splitlines()
    assert plain.code == 2 and len(lines) == 1 and "time limit" in lines[0], plain.err
    assert "partial result of" in lines[0]


def test_grep_tool_answers_within_its_limit_without_ripgrep(
    slow_ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(grep, "find_rg", lambda: None)
    toolset = ToolSet(slow_ws)
    # (a|a)* repeats no repeated group, so the tool's pattern guard lets it through
    result, took = _timed(
        lambda: toolset.call(
            "grep", {"pattern": r"^(a|a)*$", "corpus": "slow", "timeout_s": TIMEOUT}
        )
    )
    assert took < TIMEOUT + MARGIN
    assert "time limit (2 s)" in getattr(result, "text", "")


def test_grep_timeout_holds_in_a_real_process_without_ripgrep(
    slow: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    index, _, env_extra = slow
    # the same venv seen from a folder with no rg beside its python, and none on PATH
    venv = tmp_path / "venv"
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (venv / "pyvenv.cfg").write_text((Path(sys.prefix) / "pyvenv.cfg").read_text())
    (venv / "lib").symlink_to(Path(sys.prefix) / "lib")
    env = {**os.environ, **env_extra, "PATH": str(bin_dir), "PYTHONPATH": str(ROOT)}
    assert shutil.which("rg", path=env["PATH"]) is None
    cmd = [str(bin_dir / "python"), "-m", "ctxkernel", "grep", r"(\w|\w)+$", "--corpus", "slow",
           "--timeout", str(TIMEOUT), "--index-dir", str(index), "--json"]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    took = time.monotonic() - t0
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["engine"] == "python" and summary["truncated"] == "time limit (2 s)"
    assert float(summary["took_ms"]) < (TIMEOUT + 1) * 1000
    assert took < TIMEOUT + 1 + 10  # plus the interpreter's start on a loaded machine
