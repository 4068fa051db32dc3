"""Fixtures for the fuzz tests: a private copy of the tool tests' demo index, a sandbox
(home, cwd, caches) whose every file is listed before and after each example, and an
in-process runner of the real CLI entry point with the stream encodings of a real
process (stdout strict UTF-8, stderr backslash-escaped)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tools.conftest import demo_index as demo_index

from ctxkernel.cli import main as cli_main


@dataclass
class Run:
    code: int
    out: str
    err: str


@dataclass
class Sandbox:
    root: Path
    index: Path
    allowed: tuple[Path, ...]  # where a command may write: the index, runs, clone cache

    def files(self, also: tuple[Path, ...] = ()) -> dict[str, tuple[int, int]]:
        """Every file under the sandbox outside the allowed folders (and ``also``, the
        index or runs folder a command was given): (size, mtime)."""
        allowed = {p.resolve() for p in (*self.allowed, *also)}
        out: dict[str, tuple[int, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if (here / d).resolve() not in allowed]
            for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
                p = here / name
                try:
                    st = p.lstat()
                except OSError:
                    continue
                out[str(p.relative_to(self.root))] = (st.st_size, st.st_mtime_ns)
        return out


@pytest.fixture(scope="module")
def sandbox(demo_index: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    from tools.conftest import DemoIndex, define_corpus

    assert isinstance(demo_index, DemoIndex)
    root = tmp_path_factory.mktemp("fuzz")
    home, user, cwd = root / "ckhome", root / "user", root / "cwd"
    for d in (home, user, cwd):
        d.mkdir()
    index = root / "index"
    shutil.copytree(demo_index.index_dir, index)
    define_corpus(home, "demo", str(demo_index.upstream))
    (root / "files").mkdir()
    (root / "files" / "queries.jsonl").write_text(
        '{"query": "x", "corpus": "demo", "relevant": []}\n'
    )
    (root / "files" / "args.json").write_text('{"query": "make_tiled_copy"}')
    env = {
        "CTXKERNEL_HOME": str(home),
        "CTXKERNEL_INDEX_DIR": str(index),
        "HOME": str(user),
        "XDG_CACHE_HOME": str(user / ".cache"),
        "XDG_CONFIG_HOME": str(user / ".config"),
        "XDG_DATA_HOME": str(user / ".local" / "share"),
        "MPLCONFIGDIR": str(home / "cache" / "matplotlib"),
        "TRITON_CACHE_DIR": str(home / "cache" / "triton"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    allowed = (index, home / "indexes", home / "runs", home / "cache", root / "files")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CTXKERNEL_CHROMA_URL"):
            mp.delenv(key, raising=False)
        mp.chdir(cwd)
        yield Sandbox(root, index, allowed)


@pytest.fixture(autouse=True)
def _sandbox_env(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The function-scoped home of tests/conftest.py would hide the sandbox's: put it back."""
    if "sandbox" not in request.fixturenames:
        return
    sandbox: Sandbox = request.getfixturevalue("sandbox")
    home = sandbox.root / "ckhome"
    user = sandbox.root / "user"
    monkeypatch.setenv("CTXKERNEL_HOME", str(home))
    monkeypatch.setenv("CTXKERNEL_INDEX_DIR", str(sandbox.index))
    monkeypatch.setenv("XDG_CACHE_HOME", str(user / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user / ".config"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(home / "cache" / "triton"))
    monkeypatch.chdir(sandbox.root / "cwd")


@contextlib.contextmanager
def _real_streams() -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


@pytest.fixture
def run_main() -> Callable[[list[str]], Run]:
    """The real entry point in-process; any exception that escapes it is a failure."""

    def run(argv: list[str]) -> Run:
        with _real_streams() as (out, err):
            try:
                cli_main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
            # read before the wrappers go (closing one closes its buffer)
            return Run(code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8"))

    return run
