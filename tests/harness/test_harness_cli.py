"""``ctxkernel check`` and ``python -m harness check``: exit codes, the ladder, ``--json``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cheatspec import EXAMPLES, REPO

from ctxkernel.cli import main

VECTOR_ADD = EXAMPLES / "vector_add"


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["check", *args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def test_passing_check_prints_the_ladder_and_exits_0(
    capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    code, out, err = run_cli(
        [
            str(VECTOR_ADD),
            str(VECTOR_ADD / "solution_triton.py"),
            "--device",
            "cpu",
            "--shapes",
            "n=1000;n=17",
            "--seeds",
            "2",
        ],
        capsys,
    )
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("[pre-checks] ok")
    correctness = next(line for line in lines if line.startswith("[correctness]"))
    assert (
        correctness.startswith("[correctness] ok  max_abs=")
        and " psnr=" in correctness
        and " cossim=" in correctness
    )
    assert "verdict: PASSED" in out and "cpu (Triton interpreter)" in out
    assert "cpu (Triton interpreter)" in err  # the progress line goes to stderr
    runs = list((isolated_home / "runs" / "vector_add").iterdir())
    assert len(runs) == 1 and (runs[0] / "result.json").is_file()


def test_progress_prints_each_rung_to_stderr_as_it_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--progress``: a long check (minutes at upstream sizes) says where it is; each rung's
    line reaches stderr when the rung ends, with its seconds, in ladder order, stopping at a
    failed gate; stdout is the ladder as without it."""
    code, out, err = run_cli(
        [
            str(VECTOR_ADD),
            str(VECTOR_ADD / "bad" / "off_by_one.py"),
            "--device",
            "cpu",
            "--no-record",
            "--progress",
        ],
        capsys,
    )
    assert code == 1, out + err
    shown = [line for line in err.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] + "]" for line in shown] == [
        "[pre-checks]",
        "[compile]",
        "[run]",
        "[correctness]",
    ], err
    assert all(re.search(r"  \(\d+\.\d s\)$", line) for line in shown), shown
    assert shown[-1].startswith("[correctness] failed")
    ladder = [line for line in out.splitlines() if line.startswith("[")]
    assert ladder[:4] == [re.sub(r"  \(\d+\.\d s\)$", "", line) for line in shown]
    assert ladder[4].startswith("[anti-cheat] skipped")  # listed at the end, never run


def test_failing_check_exits_1_and_json_is_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        [str(VECTOR_ADD), str(VECTOR_ADD / "bad" / "torch_add.py"), "--json", "--no-record"], capsys
    )
    assert code == 1
    assert err == ""
    doc = json.loads(out)
    assert len(out.strip().splitlines()) == 1
    assert doc["type"] == "verdict" and doc["ok"] is False
    assert doc["failed_rung"] == "pre-checks"
    assert [r["name"] for r in doc["rungs"]] == [
        "pre-checks",
        "compile",
        "run",
        "correctness",
        "anti-cheat",
    ]
    assert [r["status"] for r in doc["rungs"]] == [
        "failed",
        "skipped",
        "skipped",
        "skipped",
        "skipped",
    ]
    assert {
        "environment",
        "seeds",
        "options",
        "integrity",
        "backend",
        "device",
        "interpreter",
    } <= set(doc)


def test_feedback_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        [str(VECTOR_ADD), str(VECTOR_ADD / "bad" / "syntax_error.py"), "--feedback", "--no-record"],
        capsys,
    )
    assert code == 1
    assert out.startswith("FAILED at rung 'pre-checks'")
    assert "def custom_kernel(inputs)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([str(VECTOR_ADD), "missing.py"], "candidate not found"),
        (["nowhere/problem.py", str(VECTOR_ADD / "solution_triton.py")], "problem not found"),
        (
            [str(VECTOR_ADD / "solution_triton.py"), str(VECTOR_ADD / "solution_triton.py")],
            "unknown problem format",
        ),
        (
            [str(VECTOR_ADD), str(VECTOR_ADD / "solution_triton.py"), "--shapes", "n"],
            "expected key=value",
        ),
    ],
    ids=["missing-candidate", "missing-problem", "unknown-format", "bad-shapes"],
)
def test_usage_errors_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(args, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("ctxkernel: error: ") and message in err
    assert "Traceback" not in err


def test_python_m_harness_works_without_ctxkernel(tmp_path: Path) -> None:
    """The GPU machine has no retrieval stack: ``python -m harness`` must not need it."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    # any import of these fails in the child, proving the harness never reaches for them
    for name in ("chromadb", "sentence_transformers", "bm25s", "ctxkernel"):
        (blocker / f"{name}.py").write_text(
            f"raise ImportError('{name} must not be imported by the harness')\n"
        )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(blocker), str(REPO)]))
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "check",
        str(VECTOR_ADD),
        str(VECTOR_ADD / "bad" / "torch_add.py"),
        "--json",
        "--no-record",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["failed_rung"] == "pre-checks"
    missing = subprocess.run(
        [*cmd[:4], str(VECTOR_ADD), "missing.py"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert missing.returncode == 2 and missing.stderr.startswith(
        "harness: error: candidate not found"
    )
