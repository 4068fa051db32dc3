"""The ``tilelang`` corpus: what it takes from the upstream repo and from the installed wheel,
and ``--source pkg:tilelang`` indexed offline (a tiny installed package, the real model)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ctxkernel.corpus import get_corpus, load_corpora
from ctxkernel.indexer import iter_wanted
from ctxkernel.sources import PackageSource, resolve_source
from ctxkernel.workspace import Workspace


def test_tilelang_corpus_takes_the_language_examples_docs_and_templates() -> None:
    corpus = load_corpora()["tilelang"]
    for path in (
        "tilelang/language/gemm_op.py",
        "tilelang/jit/kernel.py",
        "examples/gemm/example_gemm.py",
        "docs/deeplearning_operators/matmul.md",
        "src/tl_templates/cuda/gemm.h",
        "README.md",
    ):
        assert corpus.wants(path), path
    for path in (
        "tilelang/3rdparty/tvm/python/tvm/__init__.py",  # the bundled TVM
        "tilelang/lib/libtilelang.so",
        "tilelang/src/op/gemm.cc",  # the compiler's C++ (in the wheel)
        "src/op/gemm.cc",
        "docs/_static/img/logo.png",
    ):
        assert not corpus.wants(path), path
    assert corpus.kind_for("examples/gemm/example_gemm.py") == "example"
    assert corpus.kind_for("docs/programming_guides/instructions.md") == "doc"
    assert corpus.kind_for("tilelang/language/copy_op.py") == "source"
    assert corpus.chunker_for("src/tl_templates/cuda/copy_sm90.h") == "cpp"


def test_pkg_source_maps_the_installed_wheel_onto_upstream_paths() -> None:
    if importlib.util.find_spec("tilelang") is None:
        pytest.skip("tilelang is not installed (pip install 'ctxkernel[tilelang]')")
    corpus = get_corpus("tilelang")
    source = resolve_source(corpus, "pkg:tilelang")
    assert isinstance(source, PackageSource)
    snap = source.materialize()
    paths = {f.path for f in iter_wanted(corpus, snap)}
    assert "tilelang/language/gemm_op.py" in paths and "tilelang/jit/kernel.py" in paths
    assert not any(
        p.startswith(("tilelang/3rdparty/", "tilelang/lib/", "tilelang/src/")) for p in paths
    )
    assert snap.version.startswith("tilelang==") and snap.ref.startswith("v")


GEMM_OP = '''\
"""Tile-level GEMM."""


def gemm(A, B, C, transpose_A=False, transpose_B=False):
    """Multiply two tiles held in shared memory and accumulate the product into a register
    fragment: the warpgroup matrix-multiply of one thread block."""
    return (A, B, C, transpose_A, transpose_B)
'''


def _fake_wheel(site: Path) -> None:
    """An installed ``tilelang`` as pip leaves one: the package and its dist-info RECORD."""
    files = {
        "tilelang/__init__.py": '"""TileLang."""\n',
        "tilelang/language/gemm_op.py": GEMM_OP,
        "tilelang/3rdparty/tvm/python/tvm/__init__.py": "def vendored():\n    return 0\n",
    }
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    info = site / "tilelang-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tilelang\nVersion: 0.0.1\n")
    record = [f"{rel},," for rel in files] + ["tilelang-0.0.1.dist-info/METADATA,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


def test_pkg_tilelang_indexes_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _fake_wheel(site)
    monkeypatch.syspath_prepend(str(site))  # found before any real installation
    ws = Workspace()
    report = ws.index("tilelang", source="pkg:tilelang")
    assert report.files_total == 2  # the vendored TVM is left out
    hit = ws.search("multiply tiles in shared memory into a register fragment", k=3).hits[0]
    assert hit.chunk.path == "tilelang/language/gemm_op.py" and "gemm" in hit.chunk.defines
    assert hit.chunk.url.startswith("https://github.com/tile-ai/tilelang/blob/v0.0.1/")
