"""The real-users evaluation set: its builder checks every target against a git mirror at
a commit and the corpus definition, splits by thread deterministically, and the
committed halves are exactly what the committed sources give (no network, no mirrors)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import git
import pytest

from ctxkernel.evaluate import load_queries

REPO = Path(__file__).resolve().parents[2]
QUERIES = REPO / "bench" / "queries"


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_real_users", REPO / "bench" / "retrieval" / "build_real_users.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bru = _load_builder()

CORE_PY = "\n".join(
    ['"""A stand-in for the DSL core."""', ""]
    + [f"def helper_{i}(x):\n    return x + {i}\n" for i in range(5)]
    + ["def local_partition(tensor, tiler, index):", "    return tensor", ""]
)


@pytest.fixture
def cutlass_mirror(tmp_path: Path) -> tuple[Path, str]:
    """A git repo laid out like CUTLASS: one searched file, one excluded (docs/), one
    link-only (include/cutlass/) and one the corpus does not include (test/)."""
    root = tmp_path / "cutlass"
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.invalid")
    files = {
        "python/CuTeDSL/cutlass/cute/core.py": CORE_PY,
        "docs/index.md": "# generated docs\n",
        "include/cutlass/arch/barrier.h": "// link-only header\n",
        "test/unit/test_core.py": "def test_x():\n    pass\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    repo.git.add(A=True)
    sha = repo.index.commit("initial").hexsha
    # a later commit must not leak into the pinned view
    (root / "python/CuTeDSL/cutlass/cute/late.py").write_text("def late():\n    pass\n")
    repo.git.add(A=True)
    repo.index.commit("later")
    return root, sha


def _row(number: int = 7, relevant: list[str] | None = None, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {
        "repo": "NVIDIA/cutlass",
        "number": number,
        "type": "issue",
        "corpus": "cutlass",
        "kind": "howto",
        "query": f"how do I partition a tensor across threads ({number})",
        "relevant": (
            ["python/CuTeDSL/cutlass/cute/core.py#local_partition"]
            if relevant is None
            else relevant
        ),
        "note": "the function asked about",
    }
    row.update(extra)
    return row


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _build(
    tmp_path: Path, mirror: tuple[Path, str], rows: list[dict[str, object]]
) -> dict[str, str]:
    root, sha = mirror
    mirrors = {"cutlass": bru.Mirror.open("cutlass", root, sha)}
    return bru.build(_write(tmp_path / "sources.jsonl", rows), mirrors)


def test_valid_targets_build_both_halves(tmp_path: Path, cutlass_mirror: tuple[Path, str]) -> None:
    rows = [
        _row(n, ["python/CuTeDSL/cutlass/cute/core.py:1-3", "python/CuTeDSL/cutlass/cute/core.py"])
        for n in range(1, 21)
    ]
    files = _build(tmp_path, cutlass_mirror, rows)
    assert set(files) == {"real-users-dev.jsonl", "real-users-test.jsonl"}
    lines = [
        json.loads(ln) for t in files.values() for ln in t.splitlines() if not ln.startswith("//")
    ]
    assert len(lines) == 20
    assert all(ln["source"]["repo"] == "NVIDIA/cutlass" for ln in lines)
    assert all(files[name].startswith("// Real-users evaluation set") for name in files)


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("python/CuTeDSL/cutlass/cute/missing.py", "no such file"),
        ("python/CuTeDSL/cutlass/cute/late.py", "no such file"),  # only in a later commit
        ("python/CuTeDSL/cutlass/cute/core.py:20-999", "the file has"),
        ("python/CuTeDSL/cutlass/cute/core.py:5-2", "start <= end"),
        ("python/CuTeDSL/cutlass/cute/core.py#make_tiled_copy", "does not occur"),
        ("python/CuTeDSL/cutlass/cute/*.py", "no globs"),
        ("docs/index.md", "does not search"),  # excluded
        ("include/cutlass/arch/barrier.h", "does not search"),  # link-only
        ("test/unit/test_core.py", "does not search"),  # not included
    ],
)
def test_bad_targets_are_rejected(
    tmp_path: Path, cutlass_mirror: tuple[Path, str], target: str, problem: str
) -> None:
    with pytest.raises(bru.BadInput, match=problem):
        _build(tmp_path, cutlass_mirror, [_row(relevant=[target])])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"repo": "someone/else"}, "repo"),
        ({"corpus": "triton"}, "belongs to corpus cutlass"),
        ({"kind": "ptx"}, "kind must be"),
        ({"type": "comment"}, "type must be"),
        ({"number": "12"}, "positive integer"),
        ({"relevant": []}, "relevant must be"),
        ({"note": " "}, "note must be"),
    ],
)
def test_bad_fields_are_rejected(
    tmp_path: Path, cutlass_mirror: tuple[Path, str], change: dict[str, object], problem: str
) -> None:
    with pytest.raises(bru.BadInput, match=problem):
        _build(tmp_path, cutlass_mirror, [{**_row(), **change}])


def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, cutlass_mirror: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, _ = cutlass_mirror
    sources = _write(tmp_path / "sources.jsonl", [_row()])
    # the fake mirror does not hold the pinned CUTLASS commit
    code = bru.main(["--cutlass", str(root), "--sources", str(sources), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "not a git mirror holding commit" in err
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    assert bru.main(["--sources", str(tmp_path / "broken.jsonl"), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_split_is_fixed_by_thread(tmp_path: Path, cutlass_mirror: tuple[Path, str]) -> None:
    assert [bru.split_of("NVIDIA/cutlass", n) for n in range(1, 9)] == [
        bru.split_of("NVIDIA/cutlass", n) for n in range(1, 9)
    ]
    halves = {bru.split_of("triton-lang/triton", n) for n in range(1, 41)}
    assert halves == {"dev", "test"}
    # two questions of one thread land together; order and new rows do not move a thread
    rows = [_row(n) for n in range(1, 31)] + [_row(5, query="a second question from thread 5")]
    first = _build(tmp_path, cutlass_mirror, rows)
    again = _build(tmp_path, cutlass_mirror, [*reversed(rows), _row(99)])
    where = {
        (q["source"]["number"], q["query"]): name
        for name, text in first.items()
        for q in map(json.loads, (ln for ln in text.splitlines() if not ln.startswith("//")))
    }
    for name, text in again.items():
        for ln in text.splitlines():
            if ln.startswith("//"):
                continue
            q = json.loads(ln)
            key = (q["source"]["number"], q["query"])
            if key in where:
                assert where[key] == name
    assert {where[(5, _row(5)["query"])], where[(5, "a second question from thread 5")]} == {
        "real-users-dev.jsonl"
        if bru.split_of("NVIDIA/cutlass", 5) == "dev"
        else "real-users-test.jsonl"
    }
    assert _build(tmp_path, cutlass_mirror, rows) == first


def test_committed_halves_parse_and_come_from_the_sources() -> None:
    rows = bru.read_sources(bru.SOURCES)
    expected = bru.render_all(rows)
    seen_ids: set[str] = set()
    for name, text in expected.items():
        path = QUERIES / name
        assert path.read_text() == text, (
            f"{name} is stale: rerun bench/retrieval/build_real_users.py"
        )
        split = name.removeprefix("real-users-").removesuffix(".jsonl")
        assert load_queries(path)  # what `ctxkernel eval` reads
        for line in text.splitlines():
            if line.startswith("//"):
                continue
            q = json.loads(line)
            src = q["source"]
            assert src["repo"] in bru.THREAD_REPOS and src["number"] > 0
            assert src["type"] in bru.THREAD_TYPES
            assert q["relevant"] and all(isinstance(t, str) and t for t in q["relevant"])
            assert bru.split_of(src["repo"], src["number"]) == split
            assert q["id"] not in seen_ids
            seen_ids.add(q["id"])
    assert len(seen_ids) == len(rows)
