"""The same measurement on a baseline tree: the one helper every before/after script uses.

A baseline is another tree of this project (an older commit's ``ctxkernel/``, ``harness/``,
``examples/``...), measured in the same run as this checkout so a busy machine slows both
alike. Two steps:

- ``tree(SPEC)``: a folder that holds such a tree is taken as it is; anything else is a git
  revision of this repository, read out with ``git archive REV PATHS | tar -x`` (nothing is
  checked out) into a folder that is reused while it holds that commit (``materialise``).
- ``run(TREE, ARGS)``: ``python ARGS`` in a subprocess with ``TREE`` first on ``PYTHONPATH``
  and, by default, ``TREE`` as the working directory (``python -m`` and ``-c`` put the working
  directory before ``PYTHONPATH``, so from this checkout a baseline's command would run this
  checkout's code). ``ARGS`` name a script of that tree (``bench_script`` finds one in either
  bench layout), a module (``-m``), or this tree's own script run against that tree's code.

Used from bench scripts as ``from bench import baseline`` with the repository root appended
to ``sys.path`` (appended, so the tree under test still comes first from ``PYTHONPATH``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what a measurement of the code needs: the packages, the example problems, the corpus
# definitions, the benchmarks themselves; paths a revision lacks are left out
TREE_PATHS = ("ctxkernel", "harness", "examples", "corpora", "bench", "pyproject.toml")
MARK = ".baseline-commit"  # in a materialised tree: the commit it holds


class BaselineError(Exception):
    """A revision git does not know, or a folder that is not ours to overwrite."""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise BaselineError(f"git {' '.join(args)}: {done.stderr.strip()[:300]}")
    return done.stdout


def commit_of(rev: str, repo: Path = ROOT) -> str:
    """The full commit id ``rev`` names in ``repo``."""
    return _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()


def materialise(
    rev: str,
    dest: Path | None = None,
    *,
    repo: Path = ROOT,
    paths: Sequence[str] = TREE_PATHS,
) -> Path:
    """The tree of ``rev`` (those of ``paths`` it has) in ``dest``, default a folder under the
    temp dir named after the commit. A folder this function filled with the same commit is
    reused as it is; one it filled with another commit is emptied first; any other non-empty
    folder is refused."""
    commit = commit_of(rev, repo)
    dest = (
        Path(dest) if dest is not None else Path(tempfile.gettempdir()) / f"ck-base-{commit[:12]}"
    )
    mark = dest / MARK
    if mark.is_file() and mark.read_text().strip() == commit:
        return dest.resolve()
    if dest.exists() and any(dest.iterdir()):
        if not mark.is_file():
            raise BaselineError(f"{dest}: not empty and not a baseline tree; give another folder")
        shutil.rmtree(dest)
    present = _git(repo, "ls-tree", "--name-only", commit, "--", *paths).split()
    if not present:
        raise BaselineError(f"{rev}: none of {', '.join(paths)} at that commit")
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "--", *present], capture_output=True
    )
    if archive.returncode != 0:
        raise BaselineError(f"git archive {rev}: {archive.stderr.decode(errors='replace')[:300]}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    mark.write_text(commit + "\n")  # last: a half-written tree has no mark and is not reused
    return dest.resolve()


def tree(spec: str | Path, dest: Path | None = None, *, repo: Path = ROOT) -> Path:
    """``spec`` as a tree: an existing folder as it is, else a revision of ``repo``
    materialised (into ``dest`` if given)."""
    folder = Path(spec)
    if folder.is_dir():
        return folder.resolve()
    try:
        return materialise(str(spec), dest, repo=repo)
    except BaselineError as err:
        raise BaselineError(f"{spec}: neither a folder nor a revision of {repo} ({err})") from None


def env_for(tree: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default this process's) with ``tree`` first on ``PYTHONPATH``."""
    out = dict(os.environ if env is None else env)
    rest = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(tree)]
    out["PYTHONPATH"] = os.pathsep.join([str(tree), *rest])
    return out


def bench_script(tree: Path, name: str) -> Path:
    """The bench script ``name`` of ``tree``: ``bench/<kind>/NAME``, or ``bench/NAME`` in a
    tree from before the scripts moved into subfolders."""
    flat = tree / "bench" / name
    if flat.is_file():
        return flat
    found = sorted((tree / "bench").glob(f"*/{name}"))
    if not found:
        raise BaselineError(f"{tree}: no bench script {name}")
    return found[0]


def run(
    tree: Path,
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    capture: bool = True,
    timeout: float | None = None,
    wrap: Sequence[str] = (),
    python: str = sys.executable,
) -> subprocess.CompletedProcess[str]:
    """``[*wrap, python, *args]`` with ``tree`` first on ``PYTHONPATH`` (over ``env``, default
    this process's), in ``cwd`` (default ``tree``). Output is captured as text unless
    ``capture`` is false; ``check`` raises ``CalledProcessError`` on a non-zero exit."""
    return subprocess.run(
        [*wrap, python, *args],
        cwd=str(cwd if cwd is not None else tree),
        env=env_for(tree, env),
        capture_output=capture,
        text=True,
        check=check,
        timeout=timeout,
    )
