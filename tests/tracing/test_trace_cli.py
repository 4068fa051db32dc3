"""``ctxkernel runs trace-plot RUN`` and the run record that keeps the timeline."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from ctxkernel.cli import main as cli_main
from harness.records import write_record
from harness.tracing.buffers import parse_buffers
from harness.tracing.perfetto import write_chrome_trace
from harness.tracing.summary import summarize
from harness.verdict import RungResult, Verdict

from .conftest import FIXTURES

_capsys: list[pytest.CaptureFixture[str]] = []


@pytest.fixture(autouse=True)
def _capture(capsys: pytest.CaptureFixture[str]) -> None:
    _capsys[:] = [capsys]


def _invoke(*args: str) -> tuple[int, str, str]:
    """The console entry point, as a user runs it: (exit code, stdout, stderr)."""
    capsys = _capsys[0]
    capsys.readouterr()
    code = 0
    try:
        cli_main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _timeline(folder: Path, ck_fixture: dict, name: str = "trace-m_64.trace.json") -> Path:
    trace = parse_buffers([ck_fixture])
    return write_chrome_trace(trace, folder / name, summarize(trace).to_json())


def _png_width(path: Path) -> int:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int(struct.unpack(">I", data[16:20])[0])


def test_trace_plot_a_file_writes_a_png_beside_it(tmp_path: Path, ck_fixture: dict) -> None:
    path = _timeline(tmp_path, ck_fixture)
    code, out, _ = _invoke("runs", "trace-plot", str(path), "--width", "800")
    assert code == 0, out
    png = tmp_path / "trace-m_64.trace.png"
    assert out.strip() == str(png)
    assert _png_width(png) == 800


def test_trace_plot_a_check_record_by_name_part(tmp_path: Path, ck_fixture: dict) -> None:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _timeline(logdir, ck_fixture)
    (logdir / "worker.stderr.log").write_text("")
    verdict = Verdict(ok=True, problem="matmul_bf16", problem_format="native", candidate="c.py",
                      backend="cuda_inline", device="cuda", interpreter=False,
                      rungs=[RungResult("trace", True)])  # fmt: skip
    source = tmp_path / "c.py"
    source.write_text("x = 1\n")
    candidate = SimpleNamespace(path=source, source="x = 1\n", sha="abcdef0123456789")
    runs = tmp_path / "runs"
    record = write_record(verdict, candidate, logdir, runs)  # type: ignore[arg-type]
    assert (record / "trace-m_64.trace.json").is_file()  # the run record keeps the timeline
    out_png = tmp_path / "chosen.png"
    code, out, _ = _invoke(
        "runs", "trace-plot", "abcdef01", "--runs-dir", str(runs), "-o", str(out_png)
    )
    assert code == 0, out
    assert out.strip() == str(out_png) and out_png.stat().st_size > 1000
    code, out, _ = _invoke("runs", "trace-plot", str(record))
    assert code == 0 and (record / "trace-m_64.trace.png").is_file()


def test_trace_plot_an_agent_run_uses_its_newest_traced_version(
    tmp_path: Path, ck_fixture: dict
) -> None:
    run = tmp_path / "runs" / "agent" / "20261130-101500-matmul-3f2a"
    (run / "versions" / "1").mkdir(parents=True)
    (run / "versions" / "2").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"problem": "matmul_bf16"}))
    check_dir = tmp_path / "runs" / "matmul_bf16" / "20261130-101600-aaaa"
    check_dir.mkdir(parents=True)
    _timeline(check_dir, ck_fixture)
    (run / "versions" / "2" / "verdict.json").write_text(json.dumps({"run_dir": str(check_dir)}))
    code, out, _ = _invoke("runs", "trace-plot", str(run))
    assert code == 0, out
    assert out.strip() == str(check_dir / "trace-m_64.trace.png")


def test_trace_plot_protons_own_trace_and_errors(tmp_path: Path) -> None:
    proton = tmp_path / "gemm.chrome_trace"
    shutil.copyfile(FIXTURES / "proton_v36.chrome_trace", proton)
    code, _, _ = _invoke("runs", "trace-plot", str(proton), "-o", str(tmp_path / "g.png"))
    assert code == 0 and (tmp_path / "g.png").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _invoke("runs", "trace-plot", str(empty))
    assert code == 2 and "holds no *.trace.json" in err
    code, _, err = _invoke(
        "runs", "trace-plot", "nothing-like-this", "--runs-dir", str(tmp_path / "runs")
    )
    assert code == 2 and "no trace timeline found" in err


@pytest.mark.parametrize("flag", ["--trace"])
def test_check_help_lists_the_trace_flag(flag: str) -> None:
    code, out, _ = _invoke("check", "--help")
    assert code == 0 and flag in out
