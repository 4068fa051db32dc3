"""A native problem file whose settings have the wrong type is one line and exit 2.

``SHAPES = "n=1"`` in a ``problem.py`` ended ``ctxkernel check`` with a ``ValueError``
traceback from inside the loader (``dict("n")``); a list of strings, a shape of quoted
numbers and ``FORBIDDEN = "add"`` (read as the names "a", "d", "d") were as bad. The
settings are now checked as the file is imported (``problemspec.check_settings``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cheatspec import EXAMPLES

from ctxkernel.cli import main

VECTOR_ADD = EXAMPLES / "vector_add"
CANDIDATE = VECTOR_ADD / "solution_triton.py"


def _problem(tmp_path: Path, setting: str, value: str) -> Path:
    source = (VECTOR_ADD / "problem.py").read_text()
    lines = [line for line in source.splitlines() if not line.startswith(f"{setting} =")]
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "problem.py").write_text("\n".join([*lines, f"{setting} = {value}", ""]))
    return folder


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("SHAPES", '"n=1"', "SHAPES: expected a list of shapes, each a dict of sizes"),
        ("SHAPES", '{"n": "x"}', "SHAPES: expected a list of shapes"),
        ("SHAPES", '["n=1", "n=2"]', "SHAPES[0]: expected a dict of sizes"),
        ("SHAPES", '[{"n": 1000}, {"n": "1000"}]', "SHAPES[1]['n']: expected an int size"),
        ("SHAPES", '[{"n": None}]', "SHAPES[0]['n']: expected an int size"),
        ("SHAPES", '[{"n-1": 3}]', "SHAPES[0]: the key 'n-1' is not a Python name"),
        ("SHAPES", "[]", "SHAPES is empty"),
        ("BENCH_SHAPES", '"n=1024"', "BENCH_SHAPES: expected a list of shapes"),
        ("SEEDS", '["a", "b", "c", "d"]', "SEEDS: expected a list of int seeds"),
        ("FORBIDDEN", '"add"', "FORBIDDEN: expected a list of names"),
        ("TOLERANCE", "1e-3", "TOLERANCE: expected a dict"),
        ("PRECISION", '"fp33"', "PRECISION: expected one of"),
    ],
    ids=[
        "shapes-string",
        "shapes-dict",
        "shapes-list-of-strings",
        "shapes-quoted-size",
        "shapes-none-size",
        "shapes-bad-key",
        "shapes-empty",
        "bench-shapes-string",
        "seeds-strings",
        "forbidden-string",
        "tolerance-number",
        "precision-unknown",
    ],
)
def test_a_wrongly_typed_setting_is_one_line_and_exit_2(
    setting: str,
    value: str,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    problem = _problem(tmp_path, setting, value)
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(problem), str(CANDIDATE), "--device", "cpu", "--no-record"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, out + err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("ctxkernel: error: problem.py: "), err
    assert message in err
    assert "Traceback" not in err


def test_shapes_written_as_a_string_is_no_traceback_from_the_console_script(
    tmp_path: Path,
) -> None:
    """The installed ``ctxkernel`` command, as a user runs it."""
    problem = _problem(tmp_path, "SHAPES", '"n=1"')
    script = Path(sys.executable).with_name("ctxkernel")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "ctxkernel.cli"]
    proc = subprocess.run(
        [*command, "check", str(problem), str(CANDIDATE), "--device", "cpu", "--no-record"],
        capture_output=True,
        text=True,
        env=dict(os.environ, CTXKERNEL_CHECK_SERVER="0"),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "ctxkernel: error: problem.py: SHAPES: expected a list of shapes, each a dict of "
        """sizes like [{"n": 1024}, {"n": 4097}]; got 'n=1' (a str)"""
    ]
