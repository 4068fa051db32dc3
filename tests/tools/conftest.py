"""Fixtures for the tool, MCP and chroma-server tests: the demo corpus of the retrieval
tests plus a long file, indexed once per session (the embedding model loads once), and a
Workspace / ToolSet on that index for each test."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import git
import pytest
from retrieval.conftest import COPY_HPP, GUIDE_MD, KERNEL_PY, Repo, define_corpus
from retrieval.conftest import demo_corpus as demo_corpus  # fixtures, for these tests too
from retrieval.conftest import run_cli as run_cli
from retrieval.conftest import upstream as upstream

from ctxkernel import Workspace
from ctxkernel.tools import ToolSet

# 40 small functions about pipeline stages: many hits for one query, a long file to read
LONG_PY = (
    "\n\n".join(
        f'def stage_{i:02d}(buf, n):\n    """Pipeline stage {i}: wait on the barrier, then copy '
        f'a tile of the buffer."""\n    for j in range(n):\n        buf[j] = buf[j] + {i}\n    return buf'
        for i in range(40)
    )
    + "\n"
)


@dataclass(frozen=True)
class DemoIndex:
    index_dir: Path
    upstream: Path
    env: dict[str, str]  # what a subprocess needs to see the same corpus definition


def demo_env(home: Path, base: Path) -> dict[str, str]:
    return {
        "CTXKERNEL_HOME": str(home),
        "XDG_CACHE_HOME": str(base / "xdg-cache"),
        "XDG_CONFIG_HOME": str(base / "xdg-config"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ANONYMIZED_TELEMETRY": "False",
        "TOKENIZERS_PARALLELISM": "false",
        # the session's static embedder (tests/conftest.py)
        "CTXKERNEL_STATIC_RECIPE": os.environ["CTXKERNEL_STATIC_RECIPE"],
        "CTXKERNEL_EMBEDDERS_DIR": os.environ["CTXKERNEL_EMBEDDERS_DIR"],
    }


def make_upstream(path: Path) -> Repo:
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.invalid")
    r = Repo(path, repo)
    r.write("src/kernels.py", KERNEL_PY)
    r.write("src/examples/pipeline.py", LONG_PY)
    r.write("include/copy.hpp", COPY_HPP)
    r.write("docs/guide.md", GUIDE_MD)
    r.commit("initial")
    return r


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoIndex]:
    base = tmp_path_factory.mktemp("tools-demo")
    home = base / "home"
    home.mkdir()
    env = demo_env(home, base)
    upstream = make_upstream(base / "upstream")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("CTXKERNEL_CHROMA_URL", raising=False)
        define_corpus(home, "demo", str(upstream.path))
        Workspace(base / "index").index("demo")
    yield DemoIndex(base / "index", upstream.path, env)


@pytest.fixture
def demo_defined(isolated_home: Path, demo_index: DemoIndex) -> str:
    """The demo corpus defined in this test's home (on the session's upstream repo)."""
    define_corpus(isolated_home, "demo", str(demo_index.upstream))
    return "demo"


@pytest.fixture
def ws(demo_defined: str, demo_index: DemoIndex) -> Workspace:
    """A Workspace on the session's demo index."""
    return Workspace(demo_index.index_dir)


@pytest.fixture
def toolset(ws: Workspace) -> ToolSet:
    return ToolSet(ws)


def subprocess_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXKERNEL_")}
    env.update(extra)
    return env


@pytest.fixture
def swapped(ws: Workspace, tmp_path: Path) -> Iterator[Callable[[str], None]]:
    """Replace an indexed file (or its folder) on disk by a symlink out of the corpus, the
    file by a hard link to a file outside it (its path still resolves inside), or by a
    FIFO (a read would block); put it back afterwards (the index is shared by the
    session)."""
    entry = ws.store.cache("demo").file("include/copy.hpp")
    assert entry is not None and entry.local
    local = Path(entry.local)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "copy.hpp").write_text("TOP SECRET\n")
    saved = local.with_name("copy.hpp.saved")
    moved: list[tuple[Path, Path]] = []

    def swap(what: str) -> None:
        target = local.parent if what == "folder" else local
        backup = target.with_name(target.name + ".saved")
        target.rename(backup)
        moved.append((target, backup))
        if what == "fifo":
            os.mkfifo(target)
        elif what == "hardlink":
            os.link(outside / "copy.hpp", target)
        else:
            target.symlink_to(outside / "copy.hpp" if what == "file" else outside)

    yield swap
    for target, backup in reversed(moved):
        target.unlink()
        backup.rename(target)
    assert not saved.exists() and "make_tiled_copy" in local.read_text()
