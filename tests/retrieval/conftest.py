"""Fixtures for the retrieval tests: real git repos (gitpython), a corpus definition
dropped in the user corpora dir, the real embedding model, an in-process CLI runner, and a
module's own small corpus (its ``CORPUS`` name and ``FILES``) committed and indexed."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git
import pytest

from ctxkernel import Workspace
from ctxkernel.cli import main as cli_main

KERNEL_PY = '''\
"""Tiny kernels used by the retrieval tests."""

import math


def planted_swizzle_shared_memory_banks(tile, width):
    """Permute the columns of a shared-memory tile with an XOR swizzle so that
    threads of one warp hit distinct banks when they read a column."""
    out = []
    for row in range(len(tile)):
        out.append([tile[row][c ^ (row % width)] for c in range(width)])
    return out


def softmax_rows(x):
    """Numerically stable softmax of each row."""
    result = []
    for row in x:
        m = max(row)
        e = [math.exp(v - m) for v in row]
        s = sum(e)
        result.append([v / s for v in e])
    return result


class RingBuffer:
    """A fixed-size ring of pipeline stages for a producer and a consumer."""

    def __init__(self, stages):
        self.stages = stages
        self.head = 0

    def advance(self):
        self.head = (self.head + 1) % self.stages
        return self.head
'''

COPY_HPP = """\
#pragma once
// Copy atoms for the tests.
namespace cute {

/// Build a tiled copy from a copy atom and thread/value layouts.
template <class Atom, class ThrLayout, class ValLayout>
auto make_tiled_copy(Atom const& atom, ThrLayout const& thr, ValLayout const& val) {
  return TiledCopy<Atom, ThrLayout, ValLayout>{atom, thr, val};
}

struct SM90_TMA_LOAD {
  static void copy(void const* desc, void* smem, int x) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2}];" :: "r"(smem), "l"(desc), "r"(x));
  }
};

}  // namespace cute
"""

GUIDE_MD = """\
# Guide

Some words about kernels.

## Pipelining

Use several stages so that loads overlap with math.
The producer waits on an empty barrier before it refills a stage.

## Epilogue

Write the accumulators back to global memory, converting to the output type.
"""

CORPUS_TOML = """\
name = "{name}"
description = "A corpus the tests build."

[source]
git = "{url}"
ref = "main"

[links]
blob = "https://example.invalid/blob/{{ref}}/{{path}}#L{{start}}-L{{end}}"

[files]
include = ["src/**", "include/**", "docs/**"]
exclude = ["**/*.log"]

[chunkers]
"**/*.py" = "python"
"**/*.md" = "markdown"

[kinds]
"docs/**" = "doc"
"src/examples/**" = "example"

[limits]
min_lines = {min_lines}
"""


@dataclass
class Repo:
    path: Path
    repo: git.Repo

    def write(self, rel: str, text: str) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def commit(self, message: str) -> str:
        self.repo.git.add(A=True)
        return self.repo.index.commit(message).hexsha

    def remove(self, rel: str) -> None:
        self.repo.index.remove([rel], working_tree=True)


def init_repo(path: Path) -> Repo:
    """An empty git repo on branch main with a committer set."""
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.invalid")
    return Repo(path, repo)


def commit_files(path: Path, files: Mapping[str, str]) -> Repo:
    """A git repo at ``path`` holding ``files`` ({path: text}), committed once."""
    repo = init_repo(path)
    for rel, text in files.items():
        repo.write(rel, text)
    repo.commit("corpus")
    return repo


@pytest.fixture
def upstream(tmp_path: Path) -> Repo:
    """A git repo with a Python file, a C++ header and a Markdown guide, on branch main."""
    r = init_repo(tmp_path / "upstream")
    r.write("src/kernels.py", KERNEL_PY)
    r.write("include/copy.hpp", COPY_HPP)
    r.write("docs/guide.md", GUIDE_MD)
    r.write("docs/build.log", "not indexed\n")
    r.write("other/ignored.py", "def nope():\n    return 1\n")
    r.commit("initial")
    return r


def define_corpus(home: Path, name: str, url: str, min_lines: int = 1) -> Path:
    """Drop a corpus definition into the user corpora dir (CTXKERNEL_HOME/corpora).

    ``min_lines`` 1 keeps every structural piece its own chunk (the tests name them);
    the built-in corpora join small neighbours (see chunkers/coalesce.py).
    """
    folder = home / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{name}.toml"
    file.write_text(CORPUS_TOML.format(name=name, url=url, min_lines=min_lines))
    return file


@pytest.fixture
def demo_corpus(isolated_home: Path, upstream: Repo) -> str:
    define_corpus(isolated_home, "demo", str(upstream.path))
    return "demo"


@pytest.fixture(scope="module")
def files_upstream(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The test module's ``FILES`` ({path: text}) in a git repo, committed once for the
    module; the folder is named after its ``CORPUS``."""
    name = request.module.CORPUS
    return commit_files(tmp_path_factory.mktemp(name) / "upstream", request.module.FILES).path


@pytest.fixture
def files_ws(
    isolated_home: Path, files_upstream: Path, request: pytest.FixtureRequest
) -> Workspace:
    """A Workspace with the test module's corpus (``CORPUS``, ``FILES``) defined and indexed:
    the real index and embedder."""
    name = request.module.CORPUS
    define_corpus(isolated_home, name, str(files_upstream))
    ws = Workspace()
    ws.index(name)
    return ws


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run the real CLI entry point in-process (the embedding model stays loaded)."""

    def run(*args: str | Sequence[str]) -> CliResult:
        argv = [str(a) for a in args]
        capsys.readouterr()
        try:
            cli_main(argv)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")
