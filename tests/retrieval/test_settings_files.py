"""The settings files a user writes — ``config.toml`` and corpus definitions — in the
config dir, which ``CTXKERNEL_HOME`` moves too: a value of the wrong type is one line and
exit 2 (``index_dir = 7`` was a traceback), a key nothing reads is named in one warning
(a misspelt key was ignored silently)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ctxkernel import Workspace, errors
from ctxkernel.corpus import load_corpora

from .conftest import CORPUS_TOML, CliResult, Repo


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Warnings are once per process: each test starts as a new process would."""
    monkeypatch.setattr(errors, "_WARNED", set())
    yield


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("ctxkernel: warning: ")]


@pytest.mark.parametrize(
    ("text", "key"),
    [("index_dir = 7\n", "index_dir"), ('chroma_url = ["x"]\n', "chroma_url"),
     ("embed = 1.5\n", "embed")],
)  # fmt: skip
def test_a_config_value_of_the_wrong_type_is_one_line_not_a_traceback(
    isolated_home: Path, run_cli: Callable[..., CliResult], text: str, key: str
) -> None:
    (isolated_home / "config.toml").write_text(text)
    for args in (("search", "x"), ("corpora", "--offline"), ("docs", "tl.dot")):
        res = run_cli(*args)
        lines = res.err.strip().splitlines()
        assert res.code == 2 and len(lines) == 1 and "Traceback" not in res.err, res
        assert f"{key} in config.toml must be a string" in lines[0]


def test_an_unknown_config_key_is_named_in_one_warning(
    isolated_home: Path, demo_corpus: str, run_cli: Callable[..., CliResult]
) -> None:
    (isolated_home / "config.toml").write_text('index_dirr = "elsewhere"\nembed = "static"\n')
    res = run_cli("corpora", "--offline")
    assert res.code == 0, res.err
    warned = _warnings(res.err)
    assert len(warned) == 1 and "unknown key 'index_dirr'" in warned[0], res.err
    assert "config.toml" in warned[0] and "index_dir" in warned[0]  # what it may have meant
    # once a process: a long-lived server reads the file again and again
    assert _warnings(run_cli("corpora", "--offline").err) == []


def test_unknown_keys_of_a_corpus_definition_are_named_in_one_warning_each(
    isolated_home: Path, upstream: Repo, run_cli: Callable[..., CliResult]
) -> None:
    text = CORPUS_TOML.format(name="typo", url=str(upstream.path), min_lines=1)
    text = text.replace("include = [", "includes = [").replace(
        "[source]\n", "colour = 1\n[source]\n"
    )
    folder = isolated_home / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "typo.toml").write_text(text)
    res = run_cli("corpora", "--offline")
    assert res.code == 0, res.err
    warned = _warnings(res.err)
    assert len(warned) == 2, res.err
    assert any("typo.toml" in w and "unknown key 'files.includes'" in w for w in warned)
    assert any("unknown key 'colour'" in w for w in warned)
    assert "include" in next(w for w in warned if "files.includes" in w)
    assert "typo" in load_corpora()  # still loads: the rest of it holds
    assert _warnings(run_cli("corpora", "--offline").err) == []


def test_the_builtin_corpus_definitions_hold_no_unknown_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert {"cutlass", "triton", "ptx"} <= set(load_corpora())
    assert _warnings(capsys.readouterr().err) == []


def test_ctxkernel_home_moves_the_config_dir_as_help_says(
    isolated_home: Path, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    (isolated_home / "config.toml").write_text(f'index_dir = "{elsewhere.as_posix()}"\n')
    assert Workspace().settings.index_dir == elsewhere
    helped = run_cli("--help").out
    assert "CTXKERNEL_HOME" in helped and "config.toml" in helped and "config dir" in helped
