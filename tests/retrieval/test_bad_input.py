"""Bad input a user can give: a corpus definition with a field of the wrong type (only
that corpus breaks), undecodable bytes in argv, usage mistakes — each one line on stderr
and exit 2, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel.corpus import corpus_errors, get_corpus, load_corpora
from ctxkernel.errors import UserError

from .conftest import CliResult

ROOT = Path(__file__).resolve().parents[2]
BROKEN = 'name = "broken"\n[source]\ngit = "https://example.invalid/x.git"\n[limits]\nmax_lines = "lots"\n'


def _one_error_line(res: CliResult, *fragments: str) -> str:
    assert res.code == 2, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ctxkernel: error: "), res.err
    assert "Traceback" not in res.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_corpus_field_of_wrong_type_breaks_only_that_corpus(
    isolated_home: Path, demo_corpus: str, run_cli: Callable[..., CliResult]
) -> None:
    (isolated_home / "corpora" / "broken.toml").write_text(BROKEN)
    assert "demo" in load_corpora() and "broken" not in load_corpora()
    assert "limits.max_lines must be a positive integer, got 'lots'" in corpus_errors()["broken"]
    assert get_corpus("demo").name == "demo"
    with pytest.raises(UserError, match=r"broken\.toml: limits\.max_lines"):
        get_corpus("broken")

    listed = run_cli("corpora", "--offline")
    assert listed.code == 0 and "Traceback" not in listed.err
    warnings = listed.err.strip().splitlines()
    assert len(warnings) == 1 and "broken.toml: limits.max_lines" in warnings[0]
    assert "demo" in listed.out and "broken definition" in listed.out
    rows = {
        r["name"]: r
        for r in map(json.loads, run_cli("corpora", "--offline", "--json").out.splitlines())
    }
    assert rows["broken"]["error"] and not rows["demo"]["error"]

    _one_error_line(run_cli("index", "broken"), "broken.toml", "max_lines")
    assert run_cli("index", "demo").code == 0  # the others keep working
    assert "make_tiled_copy" in run_cli("show", "demo:include/copy.hpp").out
    assert run_cli("search", "make_tiled_copy", "--mode", "lexical").code == 0


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("max_lines = -3", "limits.max_lines"),
        ("max_lines = true", "limits.max_lines"),
        ("min_lines = 2.5", "limits.min_lines"),
    ],
)
def test_corpus_limits_must_be_positive_integers(isolated_home: Path, value: str, key: str) -> None:
    folder = isolated_home / "corpora"
    folder.mkdir(exist_ok=True)
    (folder / "bad.toml").write_text(BROKEN.replace('max_lines = "lots"', value))
    assert key in corpus_errors()["bad"]


def test_corpus_tables_and_lists_of_the_wrong_type(isolated_home: Path) -> None:
    folder = isolated_home / "corpora"
    folder.mkdir(exist_ok=True)
    src = '[source]\ngit = "https://example.invalid/x.git"\n'
    cases = {
        "a1": ("files = 3\n" + src, "files must be a table"),
        "a2": (src + "[files]\ninclude = [1, 2]\n", "files.include must be a string or a list"),
        "a3": (src + '[kinds]\n"x/**" = 5\n', "[kinds] 'x/**' must be a string"),
        "a4": ("[source]\ngit = 5\n", "source.git must be a string"),
        "a5": ("name = [", "invalid TOML"),
    }
    for name, (text, _) in cases.items():
        (folder / f"{name}.toml").write_text(text)
    errors = corpus_errors()
    for name, (_, message) in cases.items():
        assert message in errors[name], (name, errors.get(name))
    assert {"cutlass", "triton", "ptx"} <= set(load_corpora())  # the built-in ones still load


NOT_UTF8 = os.fsdecode(b"tl.\xff\xfedot")  # what Python makes of undecodable argv bytes


@pytest.mark.parametrize(
    "args",
    [
        ("search", NOT_UTF8),
        ("search", NOT_UTF8, "--mode", "hybrid"),
        ("docs", NOT_UTF8),
        ("show", f"demo:{NOT_UTF8}"),
        ("grep", NOT_UTF8, "--corpus", "demo"),
        ("search", "x", "--corpus", NOT_UTF8),
    ],
)
def test_non_utf8_arguments_are_one_line_errors(
    run_cli: Callable[..., CliResult], args: tuple[str, ...]
) -> None:
    _one_error_line(run_cli(*args), "not valid UTF-8")


def test_non_utf8_argv_bytes_in_a_real_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CTXKERNEL_INDEX_DIR": str(tmp_path / "idx")}
    for argv in ([b"docs", b"wgmma.\xffmma"], [b"search", b"\xc3\x28"], [b"show", b"ptx:\x80"]):
        proc = subprocess.run(
            [sys.executable.encode(), b"-m", b"ctxkernel", *argv],
            capture_output=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        assert proc.returncode == 2 and len(err) == 1, (argv, proc.stderr)
        assert "not valid UTF-8" in err[0] and b"Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("search", "x", "-k", "lots"), "'-k'"),
        (("search",), "Missing argument 'QUERY'"),
        (("grep", "x", "--no-such-flag"), "--no-such-flag"),
        (("no-such-command",), "No such command"),
    ],
)
def test_usage_errors_are_one_line(
    run_cli: Callable[..., CliResult], args: tuple[str, ...], fragment: str
) -> None:
    line = _one_error_line(run_cli(*args), fragment)
    assert "--help" in line


@pytest.mark.parametrize(
    "args",
    [
        ("corpora", "--offline", "--index-dir", "x" * 5000),
        ("search", "x", "--index-dir", "a/" + "x" * 300),
        ("eval", "x" * 5000),
        ("check", "x" * 5000, "y.py"),
        ("runs", "--runs-dir", "x" * 5000),
        ("tools", "run", "docs", "--input", "x" * 5000),
        ("corpora", "--index-dir", "bad\0path"),
        ("show", "demo:\0"),
    ],
)
def test_path_arguments_too_long_or_with_nul_are_one_line_errors(
    run_cli: Callable[..., CliResult], args: tuple[str, ...]
) -> None:
    _one_error_line(run_cli(*args))


def test_index_dir_that_is_a_file_is_a_one_line_error(
    tmp_path: Path, run_cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "not-a-dir"
    file.write_text("x")
    assert "is a file" in _one_error_line(run_cli("corpora", "--index-dir", str(file)))
    monkeypatch.setenv("CTXKERNEL_INDEX_DIR", str(file))  # past click's own check
    _one_error_line(run_cli("search", "x"), "is not a folder")
    monkeypatch.setenv("CTXKERNEL_INDEX_DIR", str(file / "sub"))
    _one_error_line(run_cli("search", "x"), "not a folder")
