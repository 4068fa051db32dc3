"""Corpus definitions: built-in TOMLs, user-added TOMLs, globs, kinds, tags, ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxkernel.corpus import arch_tags, get_corpus, load_corpora, parse_chunk_id
from ctxkernel.errors import UserError


def test_builtin_corpora_are_defined() -> None:
    corpora = load_corpora()
    assert {"cutlass", "triton", "ptx"} <= set(corpora)
    cutlass = corpora["cutlass"]
    assert cutlass.wants("examples/python/CuTeDSL/hopper/dense_gemm.py")
    assert cutlass.wants("python/CuTeDSL/cutlass/cute/core.py")
    assert cutlass.wants("include/cute/atom/copy_atom.hpp")
    assert cutlass.wants("media/docs/pythonDSL/overview.rst") or cutlass.wants(
        "media/docs/pythonDSL/overview.md"
    )
    # never the generated Doxygen tree nor stray dumps
    assert not cutlass.wants("docs/search/all_0.js")
    assert not cutlass.wants("examples/python/CuTeDSL/hopper/out.mlir")
    assert not cutlass.wants("examples/python/CuTeDSL/hopper/run.log")
    assert cutlass.kind_for("examples/python/CuTeDSL/hopper/dense_gemm.py") == "example"
    assert cutlass.kind_for("media/docs/cpp/cute/00_quickstart.md") == "doc"
    assert cutlass.kind_for("include/cute/tensor.hpp") == "source"
    triton = corpora["triton"]
    assert triton.wants("python/tutorials/gluon/05-wgmma.py")
    assert triton.kind_for("python/tutorials/03-matrix-multiplication.py") == "tutorial"
    assert not triton.wants("docs/_build/html/index.html")
    assert corpora["ptx"].chunker_for("index.html") == "ptx_html"
    # the CUTLASS C++ library: kept for the concept links, never searched
    assert cutlass.wants("include/cutlass/arch/barrier.h")
    assert cutlass.is_link_only("include/cutlass/arch/barrier.h")
    assert cutlass.is_link_only("include/cutlass/functional.h")
    assert not cutlass.is_link_only("include/cute/atom/copy_atom.hpp")
    assert not cutlass.wants("include/cutlass/CMakeLists.txt")  # exclude still applies


def test_user_corpus_dropped_in_config_dir(isolated_home: Path) -> None:
    folder = isolated_home / "corpora"
    folder.mkdir()
    (folder / "mine.toml").write_text(
        'name = "mine"\ndescription = "x"\n[source]\ngit = "https://example.invalid/x.git"\n'
        '[files]\ninclude = ["lib/**"]\n[kinds]\n"lib/examples/**" = "example"\n'
    )
    mine = get_corpus("mine")
    assert mine.wants("lib/a.py") and not mine.wants("src/a.py")
    assert mine.kind_for("lib/examples/x.py") == "example"
    assert mine.chunker_for("lib/a.cuh") == "cpp"


def test_bad_definitions_are_user_errors(isolated_home: Path) -> None:
    folder = isolated_home / "corpora"
    folder.mkdir()
    (folder / "broken.toml").write_text("name = [")
    assert "broken" not in load_corpora()
    with pytest.raises(UserError, match="invalid TOML"):
        get_corpus("broken")
    (folder / "broken.toml").write_text('name = "broken"\n[source]\n[kinds]\n"x" = "weird"\n')
    with pytest.raises(UserError, match="needs git, url or package"):
        get_corpus("broken")
    (folder / "broken.toml").write_text(
        'name = "broken"\n[source]\ngit = "x"\n[files]\nlink_only = 3\n'
    )
    with pytest.raises(UserError, match=r"files\.link_only must be a string or a list"):
        get_corpus("broken")


def test_unknown_corpus_names_the_known_ones() -> None:
    with pytest.raises(UserError, match=r"unknown corpus 'nope' \(known: .*cutlass"):
        get_corpus("nope")


def test_arch_tags_from_path_and_text() -> None:
    assert arch_tags("examples/python/CuTeDSL/hopper/dense_gemm.py") == ("sm90",)
    assert arch_tags("x.py", "target sm_100a and sm_90a; uses wgmma") == ("sm90", "sm100")
    assert arch_tags("include/cute/arch/copy_sm80.hpp") == ("sm80",)
    assert arch_tags("plain.py", "nothing here") == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cutlass:include/cute/tensor.hpp:10-20", ("cutlass", "include/cute/tensor.hpp", 10, 20)),
        ("triton:python/triton/testing.py", ("triton", "python/triton/testing.py", None, None)),
        ("ptx:index.html:5", ("ptx", "index.html", 5, 5)),
    ],
)
def test_chunk_ids_round_trip(text: str, expected: tuple[object, ...]) -> None:
    assert parse_chunk_id(text) == expected


@pytest.mark.parametrize("bad", ["nocolon", "c:p:20-10", "c:p:0-3"])
def test_bad_chunk_ids(bad: str) -> None:
    with pytest.raises(UserError):
        parse_chunk_id(bad)
