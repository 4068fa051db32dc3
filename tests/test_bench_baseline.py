"""bench/baseline.py, the one way bench scripts measure a baseline tree beside this one:
a revision read out of a real git repository runs its own code, not the checkout's."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import git
import pytest

REPO = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_baseline", REPO / "bench" / "baseline.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


baseline = _load()
SHOW = "import ctxkernel, sys; print(ctxkernel.VALUE, *sys.argv[1:])"


def _commit(repo: git.Repo, files: dict[str, str], message: str) -> str:
    root = Path(repo.working_tree_dir or ".")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo.git.add(A=True)
    return repo.index.commit(message).hexsha


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, str, str]:
    """A throwaway project: commit A has ``ctxkernel.VALUE = "A"`` and no examples/; commit
    B (the working tree) says "B", has examples/, and its bench script sits in a subfolder."""
    root = tmp_path / "project"
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.invalid")
    a = _commit(
        repo,
        {
            "ctxkernel/__init__.py": 'VALUE = "A"\n',
            "harness/__init__.py": "",
            "bench/show.py": SHOW + "\n",
            "docs/notes.md": "not part of a baseline tree\n",
        },
        "A",
    )
    (root / "bench" / "show.py").unlink()
    b = _commit(
        repo,
        {
            "ctxkernel/__init__.py": 'VALUE = "B"\n',
            "examples/readme.txt": "B's examples\n",
            "bench/kind/show.py": SHOW + "\n",
        },
        "B",
    )
    return root, a, b


def test_a_materialised_revision_runs_its_own_code_beside_this_tree(
    project: tuple[Path, str, str], tmp_path: Path
) -> None:
    root, a, _ = project
    old = baseline.materialise(a[:7], tmp_path / "base", repo=root)
    assert (old / "ctxkernel" / "__init__.py").read_text() == 'VALUE = "A"\n'
    assert not (old / "examples").exists()  # a path the revision lacks is left out
    assert not (old / "docs").exists()  # only what a measurement needs
    probe = tmp_path / "probe.py"  # one script, outside both trees, run against each
    probe.write_text(SHOW + "\n")
    assert baseline.run(old, [str(probe), "x"]).stdout.split() == ["A", "x"]
    assert baseline.run(root, [str(probe)]).stdout.split() == ["B"]
    # -c and -m put the working directory first: each tree's run happens in that tree
    assert baseline.run(old, ["-c", SHOW]).stdout.strip() == "A"
    assert baseline.run(root, ["-c", SHOW]).stdout.strip() == "B"
    # a tree's own bench script, in either layout
    assert baseline.bench_script(old, "show.py") == old / "bench" / "show.py"
    assert baseline.bench_script(root, "show.py") == root / "bench" / "kind" / "show.py"
    assert baseline.run(old, [str(baseline.bench_script(old, "show.py"))]).stdout.strip() == "A"


def test_a_materialised_tree_is_reused_and_replaced_by_another_commit(
    project: tuple[Path, str, str], tmp_path: Path
) -> None:
    root, a, b = project
    dest = tmp_path / "base"
    first = baseline.materialise(a, dest, repo=root)
    (first / "left-by-the-first-run").write_text("")
    assert baseline.materialise("main~1", dest, repo=root) == first
    assert (first / "left-by-the-first-run").exists()  # the same commit: reused as it is
    baseline.materialise(b, dest, repo=root)
    assert not (dest / "left-by-the-first-run").exists()
    assert (dest / "ctxkernel" / "__init__.py").read_text() == 'VALUE = "B"\n'


def test_tree_takes_a_folder_as_it_is_and_refuses_what_is_neither(
    project: tuple[Path, str, str], tmp_path: Path
) -> None:
    root, a, _ = project
    assert baseline.tree(root, repo=root) == root.resolve()
    assert baseline.tree(a, tmp_path / "base", repo=root) == (tmp_path / "base").resolve()
    with pytest.raises(baseline.BaselineError, match="neither a folder nor a revision"):
        baseline.tree("no-such-revision", repo=root)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not ours to overwrite")
    with pytest.raises(baseline.BaselineError, match="not empty"):
        baseline.materialise(a, foreign, repo=root)
    assert (foreign / "keep.txt").exists()


def test_the_tree_goes_first_on_pythonpath_and_other_entries_stay() -> None:
    given = os.pathsep.join(["/elsewhere", "/some/tree"])
    env = baseline.env_for(Path("/some/tree"), {"PYTHONPATH": given, "K": "v"})
    assert env["PYTHONPATH"].split(os.pathsep) == ["/some/tree", "/elsewhere"]
    assert env["K"] == "v"
