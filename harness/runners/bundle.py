"""Job bundles: a check packed for another machine, and its result brought back.

A bundle is a tar archive: ``job/job.json`` (the options that differ from the defaults,
the declared backend, where things are), ``job/problem/<dir>/...`` (the problem's files),
``job/candidate/<name>.py`` and, when the harness is shipped, ``lib/harness/...`` (this
very harness, so the far side runs the same rungs). ``execute_job`` (run there by
``python -m harness.runners.remote``) checks it with ``LocalRunner`` and leaves
``job/result/``: ``verdict.json`` (or ``error.json``), ``record/`` (the run record: source,
result, feedback, logs) and ``artefacts/<option>/`` (what a path option such as a dump
directory received). ``import_result`` turns that directory into a verdict here, with the
record written under this machine's ``runs/`` and the artefacts copied where asked.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..process.workerenv import harness_root
from ..runner import RunOptions
from .base import (
    LOCAL_ONLY,
    RunnerError,
    annotate,
    failure_verdict,
    options_from_wire,
    options_to_wire,
    path_options,
    record_failure,
)

if TYPE_CHECKING:
    from ..problems.candidate import Candidate
    from ..problems.problem import Problem
    from ..verdict import Verdict

JOB_FORMAT = 1
MAX_FILE_BYTES = 32 << 20
MAX_BUNDLE_BYTES = 256 << 20
SHIPPED_SUFFIXES = {
    ".py",
    ".yml",
    ".yaml",
    ".json",
    ".toml",
    ".txt",
    ".cu",
    ".cuh",
    ".h",
    ".cpp",
    ".pt",
}


def problem_files(problem: Problem) -> tuple[str, dict[str, Path]]:
    """The argument to load the problem from, relative to ``job/problem``, and its files:
    the files of its directory (not its subdirectories: candidates and records often live
    there) and its support files, a GPU MODE ``../utils.py`` beside the directory."""
    path = problem.path.resolve()
    root = path if path.is_dir() else path.parent
    arg = root.name if path.is_dir() else f"{root.name}/{path.name}"
    files: dict[str, Path] = {}
    for file in sorted(root.iterdir()):
        if file.name.startswith(".") or not file.is_file() or file.is_symlink():
            continue
        if file.suffix in SHIPPED_SUFFIXES and (
            file.stat().st_size <= MAX_FILE_BYTES or file == path
        ):
            files[f"{root.name}/{file.name}"] = file
    for support in problem.support_files:
        support = support.resolve()
        if not support.is_file():
            continue
        if support.parent == root.parent:
            files[support.name] = support
        elif support.is_relative_to(root):
            files[f"{root.name}/{support.relative_to(root).as_posix()}"] = support
    return arg, files


def defining_files(problem: Problem) -> list[Path]:
    """The files that define what is checked (not the candidates beside them)."""
    from ..problems.problem import detect_format

    fmt, target = detect_format(problem.path)
    if target.is_file():
        main = [target]
    elif fmt == "native":
        main = [target / "problem.py"]
    else:
        main = [target / n for n in ("reference.py", "task.py", "task.yml", "utils.py")]
    return [p for p in [*main, *problem.support_files] if p.is_file()]


def harness_files() -> dict[str, Path]:
    """This harness's own files (sources and any data beside them), to ship with a job."""
    package = harness_root() / "harness"
    return {
        f"harness/{p.relative_to(package).as_posix()}": p
        for p in sorted(package.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    }


def job_document(problem: Problem, candidate: Candidate, options: RunOptions) -> dict[str, Any]:
    paths = path_options(options)
    arg, _ = problem_files(problem)
    return {
        "format": JOB_FORMAT,
        "problem": f"problem/{arg}",
        "candidate": f"candidate/{candidate.path.name}",
        "backend": candidate.backend if candidate.backend_declared else None,
        "sha": candidate.sha,
        "options": options_to_wire(options, changed_only=True, drop=(*LOCAL_ONLY, *paths)),
        "paths": {name: f"result/artefacts/{name}" for name in paths},
    }


def pack_job(
    problem: Problem, candidate: Candidate, options: RunOptions, ship_harness: bool = True
) -> bytes:
    """The bundle for one check, as tar bytes."""
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add_bytes(name: str, data: bytes) -> None:
            nonlocal total
            total += len(data)
            if total > MAX_BUNDLE_BYTES:
                raise RunnerError(
                    f"the job for {candidate.path.name} exceeds {MAX_BUNDLE_BYTES >> 20} MiB: "
                    "point PROBLEM at a smaller directory"
                )
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))

        doc = job_document(problem, candidate, options)
        add_bytes("job/job.json", json.dumps(doc, indent=1).encode())
        _, files = problem_files(problem)
        for rel, path in files.items():
            add_bytes(f"job/problem/{rel}", path.read_bytes())
        add_bytes(f"job/candidate/{candidate.path.name}", candidate.source.encode())
        if ship_harness:
            for rel, path in harness_files().items():
                add_bytes(f"lib/{rel}", path.read_bytes())
    return buffer.getvalue()


def extract(data: bytes, target: Path) -> None:
    """Unpack tar bytes under ``target``, refusing links and paths that leave it."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(target, filter="data")
        else:  # pragma: no cover - Python < 3.11.4
            for member in tar.getmembers():
                if member.issym() or member.islnk() or ".." in Path(member.name).parts:
                    raise RunnerError(f"refusing {member.name!r} in a job archive")
            tar.extractall(target)


def pack_dir(directory: Path, arcname: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(directory, arcname=arcname)
    return buffer.getvalue()


# -- the far side ---------------------------------------------------------------------------


def execute_job(jobdir: Path) -> int:
    """Check the job in ``jobdir`` here; leave ``result/``. 0: a verdict, 2: usage error
    (the problem is broken, an option unknown), 3: harness error."""
    from ..problems.candidate import load_candidate
    from ..problems.problem import load_problem
    from ..runner import LocalRunner

    result = jobdir / "result"
    result.mkdir(exist_ok=True)
    try:
        job = json.loads((jobdir / "job.json").read_text())
        if int(job.get("format", 0)) != JOB_FORMAT:
            raise RunnerError(
                f"job format {job.get('format')} is not {JOB_FORMAT}: update the harness here"
            )
        options = options_from_wire(job.get("options") or {})
        options.record = True
        options.runs_dir = jobdir / "runs"
        (result / "artefacts").mkdir(exist_ok=True)
        for name, rel in (job.get("paths") or {}).items():
            if name not in {f.name for f in fields(RunOptions)}:
                raise RunnerError(f"this harness has no option {name!r}: update it here")
            setattr(options, name, jobdir / rel)
        problem = load_problem(jobdir / job["problem"])
        candidate = load_candidate(jobdir / job["candidate"], problem, backend=job.get("backend"))
        verdict = LocalRunner().run(problem, candidate, options)
        if verdict.run_dir:
            shutil.move(verdict.run_dir, result / "record")
        (result / "verdict.json").write_text(json.dumps(verdict.to_json()))
        return 0
    except UsageError as exc:
        (result / "error.json").write_text(json.dumps({"kind": "usage", "message": str(exc)}))
        return 2
    except Exception as exc:
        import traceback

        doc = {
            "kind": "internal",
            "message": f"{type(exc).__name__}: {exc}",
            "detail": traceback.format_exc()[-3000:],
        }
        (result / "error.json").write_text(json.dumps(doc))
        return 3


# -- back here ------------------------------------------------------------------------------


def import_result(
    result: Path,
    problem: Problem,
    candidate: Candidate,
    options: RunOptions,
    info: dict[str, Any],
) -> Verdict:
    """The verdict in a returned ``result/`` directory, its record kept under this
    machine's runs dir and its artefacts copied to the paths the options name. A usage
    error on the far side raises ``RunnerError``; a harness error there becomes a failed
    (not final) verdict."""
    from ..records import new_run_dir
    from ..verdict import Verdict

    error_file = result / "error.json"
    if error_file.is_file():
        error = json.loads(error_file.read_text())
        if error.get("kind") == "usage":
            raise RunnerError(f"{info.get('host') or info.get('kind')}: {error.get('message')}")
        reason = f"harness error on {info.get('host') or info.get('node') or 'the far side'}: {error.get('message')}"
        verdict = failure_verdict(problem, candidate, options, reason, info)
        return record_failure(verdict, candidate, options, result if result.is_dir() else None)
    verdict_file = result / "verdict.json"
    if not verdict_file.is_file():
        raise FileNotFoundError(f"no verdict in {result}")
    verdict = Verdict.from_json(json.loads(verdict_file.read_text()))
    verdict.candidate = str(candidate.path)
    verdict.run_dir = None
    record = result / "record"
    if options.record and record.is_dir():
        dest = new_run_dir(verdict.problem, candidate.sha, options.runs_dir)
        for item in record.iterdir():
            if item.is_dir():
                shutil.copytree(item, dest / item.name, symlinks=False)
            elif item.is_file():
                shutil.copyfile(item, dest / item.name)
        verdict.run_dir = str(dest)
    for name, local in path_options(options).items():
        got = result / "artefacts" / name
        if got.is_dir():
            shutil.copytree(got, local, dirs_exist_ok=True)
        elif got.is_file():
            local.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(got, local)
    return annotate(verdict, info)


def environ_with_harness(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with this harness first on PYTHONPATH."""
    out = dict(os.environ if env is None else env)
    paths = [str(harness_root()), *filter(None, out.get("PYTHONPATH", "").split(os.pathsep))]
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return out
