"""``search --mode lexical`` ("for exact identifiers") ranks the definition of an exact
identifier first: BM25 alone put the many chunks that call a name above the one that
defines it (``make_tiled_copy``'s definition 4th; ``tl.dot``'s and ``do_bench``'s out of
the top 3)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel import Workspace

from .conftest import CliResult, Repo

# one file defines each name, documented at length as real APIs are; the others call it
# again and again, in short functions named after it, so by term counts (BM25 prefers
# short chunks that repeat a term) they match the name better than its definition does
PROSE = "".join(
    f"    Note {i}: the layouts are checked at trace time and the result is cached per shape.\n"
    for i in range(40)
)

DEFINES = {
    "include/cute/atom.hpp": "#pragma once\nnamespace cute {\n\n/**\n"
    + PROSE.replace("    ", " * ")
    + """ */
template <class Atom, class LayoutTV, class Tiler>
auto make_tiled_copy(Atom const& atom, LayoutTV const& layout_tv, Tiler const& tiler) {
  auto layout = zipped_divide(layout_tv, tiler);
  return TiledCopy<Atom, decltype(layout)>{atom, layout};
}

}  // namespace cute
""",
    "src/triton/language/core.py": 'def dot(input, other, acc=None, out_dtype=None):\n    """Matrix product of two blocks.\n\n'
    + PROSE
    + '    """\n    return _semantic_dot(input, other, acc, out_dtype)\n',
    "src/triton/testing.py": 'def do_bench(fn, warmup=25, rep=100, quantiles=None):\n    """Time a function: the median by default.\n\n'
    + PROSE
    + '    """\n    times = [_run(fn) for _ in range(rep)]\n    return _summarize(times, quantiles)\n',
}

CALLERS = {
    f"src/examples/tiled_copy_dot_bench_{i}.py": "\n\n".join(
        f"""\
def tiled_copy_dot_bench_{i}_{j}(a, b, atom, layout, tiler, fn):
    # make_tiled_copy, tl.dot, do_bench
    copy = make_tiled_copy(atom, layout, tiler)
    c = tl.dot(tl.dot(a, b), b)
    return make_tiled_copy(atom, layout, tiler), c, do_bench(fn), do_bench(fn)"""
        for j in range(3)
    )
    + "\n"
    for i in range(6)
}

NAMES = {
    "make_tiled_copy": "include/cute/atom.hpp",
    "tl.dot": "src/triton/language/core.py",
    "do_bench": "src/triton/testing.py",
}


@pytest.fixture
def names_ws(demo_corpus: str, upstream: Repo, tmp_path: Path) -> Workspace:
    for rel, text in DEFINES.items():
        upstream.write(rel, text)
    for rel, text in CALLERS.items():
        upstream.write(rel, text)
    upstream.remove("include/copy.hpp")  # the fixture's own make_tiled_copy: one definition
    upstream.commit("definitions and their callers")
    ws = Workspace(tmp_path / "index")
    ws.index(demo_corpus)
    return ws


@pytest.mark.parametrize("name", list(NAMES))
def test_lexical_mode_ranks_an_exact_identifiers_definition_first(
    names_ws: Workspace, name: str
) -> None:
    hits = names_ws.search(name, k=3, mode="lexical").hits
    assert hits and hits[0].chunk.path == NAMES[name], [h.id for h in hits]
    assert name.rsplit(".", 1)[-1] in hits[0].chunk.defines
    # the callers are still there, after it
    assert any(h.chunk.path.startswith("src/examples/") for h in hits[1:])


def test_lexical_mode_from_the_cli_puts_the_definition_first(
    names_ws: Workspace, run_cli: Callable[..., CliResult]
) -> None:
    res = run_cli("search", "make_tiled_copy", "--mode", "lexical", "-k", "3", "--json",
                  "--index-dir", str(names_ws.store.index_dir))  # fmt: skip
    assert res.code == 0, res.err
    first = json.loads(res.out.splitlines()[0])
    assert first["path"] == NAMES["make_tiled_copy"] and first["via"] == "lexical"
