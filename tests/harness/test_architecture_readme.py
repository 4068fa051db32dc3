"""The README's Architecture section is true of the tree: every path its table names
exists, every harness package is named there, and so is every module at the harness's top.

In a row's first cell the first path is from the repository root; a bare name after it
(``problem.py``, ``importers/``) sits beside it, in the same folder."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("harness/", "ctxkernel/", "corpora/", "examples/", "bench/", "tests/")


def architecture_section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index("\n## Architecture\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def named_paths() -> list[str]:
    """Every path the table's first column names, resolved against the row's first path."""
    out: list[str] = []
    for line in architecture_section().splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        folder = ""
        for name in re.findall(r"`([^`]+)`", cell):
            if name.startswith(ROOTS):
                path = name
                folder = name.rstrip("/").rsplit("/", 1)[0] + "/"
            else:
                assert folder, f"a bare name before any path: {line}"
                path = folder + name
            out.append(path)
    return out


def test_every_path_the_architecture_section_names_exists() -> None:
    paths = named_paths()
    assert len(paths) > 40
    missing = [p for p in paths if not (REPO / p).exists()]
    assert missing == []
    wrong_kind = [p for p in paths if p.endswith("/") and not (REPO / p).is_dir()]
    assert wrong_kind == []


def test_every_harness_package_and_top_module_is_named() -> None:
    named = set(named_paths())
    packages = sorted(
        str(init.parent.relative_to(REPO)) + "/" for init in (REPO / "harness").rglob("__init__.py")
    )
    assert "harness/worker/" in packages
    assert [p for p in packages if p not in named] == []
    top = sorted(str(m.relative_to(REPO)) for m in (REPO / "harness").glob("*.py"))
    assert [m for m in top if m not in named] == []


def test_the_harness_top_stays_small() -> None:
    """The rooms hold the rest: at most fourteen modules at the harness's top."""
    assert len(list((REPO / "harness").glob("*.py"))) <= 14
