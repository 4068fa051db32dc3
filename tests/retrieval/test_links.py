"""Concept links on small corpora the tests write: a PTX section, a header with the
inline asm, a Python wrapper and examples, linked both ways; a re-index of a changed
wrapper moves its link; the architecture filter on search, docs and related."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import git
import pytest

from ctxkernel import indexer
from ctxkernel.links import make
from ctxkernel.links.mentions import _anchor_key, extract
from ctxkernel.links.resolve import Vocabulary, for_concepts
from ctxkernel.links.table import LINKS_FILE, build, rows, table
from ctxkernel.tools import ToolError, ToolSet
from ctxkernel.workspace import Workspace

from .conftest import CliResult, Repo, dedent

PTX_TOML = """\
name = "ptx"
description = "A PTX manual the tests write."

[source]
git = "{url}"
ref = "main"

[links]
doc = "https://example.invalid/ptx{{anchor}}"

[files]
include = ["**/*.md"]

[chunkers]
"**/*.md" = "markdown"

[kinds]
"**" = "doc"

[limits]
min_lines = 1
"""

CODE_TOML = """\
name = "cutlass"
description = "Wrappers and examples the tests write."

[source]
git = "{url}"
ref = "main"

[links]
blob = "https://example.invalid/blob/{{ref}}/{{path}}#L{{start}}-L{{end}}"

[files]
include = ["include/**", "python/**", "examples/**"]

[chunkers]
"**/*.py" = "python"

[kinds]
"examples/**" = "example"

[limits]
min_lines = 1
"""

WGMMA_MD = """\
# 9.7.15.5.2. Asynchronous Multiply-and-Accumulate Instruction: wgmma.mma_async

Perform matrix multiply-and-accumulate operation across warpgroup.

Syntax

    wgmma.mma_async.sync.aligned.shape.dtype.bf16.bf16  d, a-desc, b-desc, scale-d;

Target ISA Notes

Requires `sm_90a`.
"""

TCGEN05_MD = """\
# 9.7.16.10.9.1. TensorCore 5th Generation Instructions: tcgen05.mma

The tcgen05.mma is an asynchronous instruction which initiates an MMA operation.

Target ISA Notes

Supported on following architectures: `sm_100a`, `sm_101a`.
"""

GMMA_HPP = """\
#pragma once
namespace cute::SM90::GMMA {

struct MMA_64x8x16_F32BF16BF16_SS {
  static void fma(uint64_t const& desc_a, uint64_t const& desc_b, float& d0) {
    asm volatile(
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{%0}, %1, %2, p;\\n"
      : "+f"(d0) : "l"(desc_a), "l"(desc_b));
  }
};

}  // namespace cute::SM90::GMMA
"""

UMMA_HPP = """\
#pragma once
namespace cute {

struct SM100_MMA_BF16_SS {
  static void fma(uint64_t const& desc_a, uint64_t const& desc_b, uint32_t const& tmem_c) {
    asm volatile(
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3;\\n"
      :: "r"(tmem_c), "l"(desc_a), "l"(desc_b), "r"(0));
  }
};

}  // namespace cute
"""

WRAPPER_PY = '''\
"""Warpgroup MMA for the tests."""

from cutlass._mlir.dialects import nvvm


def warpgroup_mma_async(acc, a_desc, b_desc):
    """Issue one warpgroup MMA."""
    return nvvm.{op}(acc, a_desc, b_desc)
'''

HOPPER_EXAMPLE_PY = '''\
"""A Hopper GEMM example for the tests."""

from cutlass.cute.arch.mma import warpgroup_mma_async


def gemm_mainloop(acc, a_descs, b_descs):
    for a_desc, b_desc in zip(a_descs, b_descs):
        acc = warpgroup_mma_async(acc, a_desc, b_desc)
    return acc
'''

BLACKWELL_EXAMPLE_CU = """\
// A Blackwell GEMM example for the tests.
#include <cute/arch/mma_sm100_umma.hpp>

__global__ void blackwell_gemm_kernel(uint64_t a, uint64_t b, uint32_t tmem) {
  cute::SM100_MMA_BF16_SS::fma(a, b, tmem);
}
"""


def _repo(path: Path, files: dict[str, str]) -> Repo:
    repo = git.Repo.init(path, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "test")
        cw.set_value("user", "email", "test@example.invalid")
    r = Repo(path, repo)
    for rel, text in files.items():
        r.write(rel, text)
    r.commit("initial")
    return r


@pytest.fixture
def linked(isolated_home: Path, tmp_path: Path) -> tuple[Workspace, Repo]:
    ptx = _repo(
        tmp_path / "ptx",
        {"isa/wgmma_mma_async.md": WGMMA_MD, "isa/tcgen05_mma.md": TCGEN05_MD},
    )
    code = _repo(
        tmp_path / "code",
        {
            "include/cute/arch/mma_sm90_gmma.hpp": GMMA_HPP,
            "include/cute/arch/mma_sm100_umma.hpp": UMMA_HPP,
            "python/CuTeDSL/cutlass/cute/arch/mma.py": WRAPPER_PY.format(op="wgmma_mma_async"),
            "examples/hopper/gemm.py": HOPPER_EXAMPLE_PY,
            "examples/blackwell/gemm.cu": BLACKWELL_EXAMPLE_CU,
        },
    )
    folder = isolated_home / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ptx.toml").write_text(PTX_TOML.format(url=ptx.path))
    (folder / "cutlass.toml").write_text(CODE_TOML.format(url=code.path))
    ws = Workspace()
    ws.index("ptx")
    ws.index("cutlass")
    return ws, code


def _ids(links_json: list[dict[str, object]]) -> dict[str, str]:
    return {str(link["path"]): str(link["group"]) for link in links_json}


HEADER = "include/cute/arch/mma_sm90_gmma.hpp"
WRAPPER = "python/CuTeDSL/cutlass/cute/arch/mma.py"
EXAMPLE = "examples/hopper/gemm.py"


def test_ptx_section_links_to_header_wrapper_and_example(
    linked: tuple[Workspace, Repo], run_cli: Callable[..., CliResult]
) -> None:
    res = run_cli("docs", "wgmma.mma_async", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["best"]["corpus"] == "ptx"
    groups = _ids(doc["links"])
    assert groups[HEADER] == "cutlass C++"
    assert groups[WRAPPER] == "CuTeDSL"
    assert groups[EXAMPLE] == "examples"
    # tcgen05 code is not an implementation of wgmma
    assert "include/cute/arch/mma_sm100_umma.hpp" not in groups
    assert "examples/blackwell/gemm.cu" not in groups
    by_path = {link["path"]: link for link in doc["links"]}
    assert by_path[HEADER]["role"] == "implements" and by_path[HEADER]["how"] == "asm"
    assert by_path[EXAMPLE]["role"] == "uses" and by_path[EXAMPLE]["via"] == "warpgroup_mma_async"
    assert by_path[HEADER]["url"].startswith("https://example.invalid/blob/")
    text = run_cli("docs", "wgmma.mma_async").out
    assert "implemented by / used in:" in text and "  cutlass C++:" in text and HEADER in text


def test_wrapper_and_example_link_back_to_the_section(
    linked: tuple[Workspace, Repo], run_cli: Callable[..., CliResult]
) -> None:
    ws, _ = linked
    section = ws.docs("wgmma.mma_async", ["ptx"]).best
    assert section is not None
    for path in (HEADER, WRAPPER, EXAMPLE):
        chunk = next(c for c in ws.store.cache("cutlass").chunks_of_file(path) if c.defines)
        rel = ws.related(chunk.id)
        assert rel.concepts == ["wgmma.mma_async"], path
        assert [s.chunk.id for s in rel.sections] == [section.id], path
    # from the wrapper: its caller is the example; from the section: the wrapper
    wrapper = next(c for c in ws.store.cache("cutlass").chunks_of_file(WRAPPER) if c.defines)
    assert EXAMPLE in {lk.chunk.path for lk in ws.related(wrapper.id).users}
    res = run_cli("related", section.id, "--json")
    assert res.code == 0, res.err
    found = json.loads(res.out)
    relations = {(lk["relation"], lk["path"]) for lk in found["links"]}
    assert ("implementer", HEADER) in relations and ("implementer", WRAPPER) in relations
    assert ("sibling", EXAMPLE) in relations


def test_reindexing_a_changed_wrapper_updates_its_link(
    linked: tuple[Workspace, Repo],
) -> None:
    ws, code = linked
    assert WRAPPER in _paths(ws, "wgmma.mma_async")
    code.write(WRAPPER, WRAPPER_PY.format(op="tcgen05_mma"))
    code.commit("the wrapper now issues tcgen05.mma")
    ws.update("cutlass")
    assert WRAPPER not in _paths(ws, "wgmma.mma_async")
    assert WRAPPER in _paths(ws, "tcgen05.mma")
    # and no link names a chunk the index no longer has
    cache = ws.store.synced_cache("cutlass")
    db = table(cache)
    ids = {row[0] for row in db.execute("SELECT chunk_id FROM links")}
    db.close()
    assert ids and ids <= cache.all_ids()


LAYOUT_HPP = """\
#pragma once
namespace cute {
template <class Shape, class Stride>
struct Layout { Shape shape; Stride stride; };
}  // namespace cute
"""

CALLER_PY = '''\
"""Another Hopper example for the tests."""

from cutlass.cute.arch.mma import warpgroup_mma_async


def tile_step(acc, a_desc, b_desc):
    return warpgroup_mma_async(acc, a_desc, b_desc)
'''


def _table(ws: Workspace) -> tuple[int, list[tuple[object, ...]], str]:
    """(inode, rows in order, generation) of the cutlass link table."""
    cache = ws.store.synced_cache("cutlass")
    artifact = cache.directory / LINKS_FILE
    db = table(cache)
    rows = db.execute("SELECT * FROM links").fetchall()
    generation = db.execute("SELECT value FROM info WHERE key='generation'").fetchone()[0]
    db.close()
    assert generation == cache.get_info("generation")
    return artifact.stat().st_ino, rows, generation


def test_a_change_no_link_is_made_from_keeps_the_table(linked: tuple[Workspace, Repo]) -> None:
    """A file with no instruction, no call to a linked name and no definition of one,
    added, changed and removed: the table stays (its generation moves with the index),
    and holds what a full build finds, row for row."""
    ws, code = linked
    inode, rows, generation = _table(ws)
    for step in ("add", "change", "remove"):
        if step == "remove":
            code.remove("include/cute/layout.hpp")
        else:
            code.write(
                "include/cute/layout.hpp", LAYOUT_HPP + ("// v2\n" if step == "change" else "")
            )
        code.commit(f"layout: {step}")
        ws.update("cutlass")
        now_inode, now_rows, now_generation = _table(ws)
        assert now_generation != generation, step  # the index moved on
        assert (now_inode, now_rows) == (inode, rows), step  # the table did not need to
        generation = now_generation
    build(ws.store.synced_cache("cutlass"))  # what a full build finds
    assert _table(ws)[1] == rows


def test_a_file_that_starts_calling_a_wrapper_is_linked(linked: tuple[Workspace, Repo]) -> None:
    """A new caller of a linked wrapper, then the caller gone: the table is built again
    each time (the shortcut never keeps a stale link or misses a new one)."""
    ws, code = linked
    inode, _, _ = _table(ws)
    code.write("examples/hopper/tile.py", CALLER_PY)
    code.commit("a second caller")
    ws.update("cutlass")
    assert "examples/hopper/tile.py" in _paths(ws, "wgmma.mma_async")
    assert _table(ws)[0] != inode  # built again
    code.remove("examples/hopper/tile.py")
    code.commit("the caller gone")
    ws.update("cutlass")
    assert "examples/hopper/tile.py" not in _paths(ws, "wgmma.mma_async")
    assert EXAMPLE in _paths(ws, "wgmma.mma_async")


HELPER_PY = '''\
"""Hopper helpers for the tests."""

from cutlass.cute.arch.mma import warpgroup_mma_async


def make_tiled_wgmma_step(acc, a_desc, b_desc):
    return warpgroup_mma_async(acc, a_desc, b_desc)
'''

HELPED_EXAMPLE_PY = '''\
"""An example that builds its MMA through a helper."""

from cutlass.utils.hopper_helpers import make_tiled_wgmma_step


def dense_step(acc, a, b):
    return make_tiled_wgmma_step(acc, a, b)
'''


def _canonical(ws: Workspace) -> tuple[object, ...]:
    """The link artifact's rows: each chunk's links in their order, names and calls as sets."""
    cache = ws.store.synced_cache("cutlass")
    db = table(cache)
    try:
        return rows(db)
    finally:
        db.close()


def test_changed_files_links_are_applied_as_a_full_build_finds_them(
    linked: tuple[Workspace, Repo],
) -> None:
    """Callers, helpers and wrappers added, edited and removed: each re-index updates the
    changed files' links in place when what other files link through stays, builds the
    table again when it moves, and either way holds what a full build finds."""
    ws, code = linked
    steps: list[tuple[str, Callable[[], None], str]] = [
        ("a new caller", lambda: code.write("examples/hopper/tile.py", CALLER_PY), "updated"),
        # the same instruction in the same wrapper, a line further down: its link moves
        ("an edited header", lambda: code.write(HEADER, "// v2\n" + GMMA_HPP), "updated"),
        ("a new helper", lambda: code.write("python/CuTeDSL/cutlass/utils/hopper_helpers.py", HELPER_PY), "updated"),
        ("an example of it", lambda: code.write("examples/hopper/dense.py", HELPED_EXAMPLE_PY), "updated"),
        ("the helper edited", lambda: code.write("python/CuTeDSL/cutlass/utils/hopper_helpers.py", "# v2\n" + HELPER_PY), "updated"),
        ("the wrapper's instruction", lambda: code.write(WRAPPER, WRAPPER_PY.format(op="tcgen05_mma")), "updated"),
        ("the caller gone", lambda: code.remove("examples/hopper/tile.py"), "updated"),
        ("a file no link is made from", lambda: code.write("include/cute/layout.hpp", LAYOUT_HPP), "kept"),
    ]  # fmt: skip
    wgmma: dict[str, set[str]] = {}
    for label, change, expected in steps:
        change()
        code.commit(label)
        report = ws.update("cutlass")
        assert report.links == expected, label
        applied = _canonical(ws)
        wgmma[label] = _paths(ws, "wgmma.mma_async")
        build(ws.store.synced_cache("cutlass"))
        assert _canonical(ws) == applied, label
    assert "examples/hopper/tile.py" in wgmma["a new caller"]
    assert "examples/hopper/dense.py" in wgmma["an example of it"]  # through the helper
    assert "examples/hopper/dense.py" in wgmma["the helper edited"]
    # the wrapper issues tcgen05 now: no Hopper code reaches wgmma through it
    assert WRAPPER not in wgmma["the wrapper's instruction"]
    assert "examples/hopper/dense.py" not in wgmma["the wrapper's instruction"]


FENCE_CALLER_PY = '''\
"""An example written before its wrapper."""

from cutlass.cute.arch.fence import warpgroup_fence_operand


def fence_step(acc):
    return warpgroup_fence_operand(acc)
'''

FENCE_WRAPPER_PY = '''\
"""A fence wrapper for the tests."""

from cutlass._mlir.dialects import nvvm


def warpgroup_fence_operand(acc):
    return nvvm.wgmma_mma_async(acc)
'''


def test_a_new_wrapper_links_the_code_that_already_called_it(
    linked: tuple[Workspace, Repo], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name spelled before anything defines it, then defined; a name whose callers cross
    the cap; the wrapper gone: the files that spell, call or define a moved name are
    linked again with the changed one, and the table is what a full build finds."""
    ws, code = linked
    # a file calls a name in two chunks (its import, its use): two files are too common
    monkeypatch.setattr(make, "USER_NAME_CAP", 3)
    build(ws.store.synced_cache("cutlass"))
    steps: list[tuple[str, Callable[[], None], str]] = [
        # nothing links it yet: the table stays
        ("a call of an unknown name", lambda: code.write("examples/hopper/fence.py", FENCE_CALLER_PY), "kept"),
        ("its wrapper", lambda: code.write("python/CuTeDSL/cutlass/cute/arch/fence.py", FENCE_WRAPPER_PY), "updated"),
        ("a second caller: over the cap", lambda: code.write("examples/hopper/tile.py", CALLER_PY), "updated"),
        ("the wrapper gone", lambda: code.remove("python/CuTeDSL/cutlass/cute/arch/fence.py"), "updated"),
    ]  # fmt: skip
    found: dict[str, set[str]] = {}
    for label, change, expected in steps:
        change()
        code.commit(label)
        assert ws.update("cutlass").links == expected, label
        applied = _canonical(ws)
        found[label] = _paths(ws, "wgmma.mma_async")
        build(ws.store.synced_cache("cutlass"))
        assert _canonical(ws) == applied, label
    assert "examples/hopper/fence.py" not in found["a call of an unknown name"]
    assert "examples/hopper/fence.py" in found["its wrapper"]  # the old file, linked now
    # warpgroup_mma_async has two callers now: neither example is linked through it
    assert EXAMPLE in found["its wrapper"] and EXAMPLE not in found["a second caller: over the cap"]
    assert "examples/hopper/fence.py" not in found["the wrapper gone"]


def test_a_run_stopped_before_its_links_leaves_none_stale(
    linked: tuple[Workspace, Repo], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the chunks were written and before the links: the next run finds
    every file unchanged, and makes the links (and the lexical index) again anyway."""
    ws, code = linked
    code.write("examples/hopper/tile.py", CALLER_PY)
    code.commit("a second caller")

    def killed(*args: object) -> str:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(indexer, "refresh_links", killed)
        ws.update("cutlass")
    fresh = Workspace()
    report = fresh.update("cutlass")
    assert report.files_changed == 0 and report.links == "built"
    assert "examples/hopper/tile.py" in _paths(fresh, "wgmma.mma_async")
    hits = fresh.search("tile_step", corpora=["cutlass"], mode="lexical", k=3).hits
    assert hits and hits[0].chunk.path == "examples/hopper/tile.py"
    assert fresh.update("cutlass").links == "kept"


def test_links_artifact_rebuilds_when_older_than_the_index(
    linked: tuple[Workspace, Repo],
) -> None:
    ws, _ = linked
    cache = ws.store.synced_cache("cutlass")
    artifact = cache.directory / LINKS_FILE
    artifact.unlink()
    assert WRAPPER in _paths(ws, "wgmma.mma_async")  # built again on first use
    assert artifact.exists()


def _paths(ws: Workspace, topic: str) -> set[str]:
    vocab = Vocabulary.of(ws.store)
    concept = vocab.concept_of(topic)
    assert concept is not None
    return {lk.chunk.path for lk in for_concepts(ws.store, [concept], vocab=vocab)}


def test_arch_filter_drops_what_the_target_cannot_run(
    linked: tuple[Workspace, Repo], run_cli: Callable[..., CliResult]
) -> None:
    res = run_cli("search", "mma", "--arch", "sm_90", "--mode", "lexical", "--json", "-k", "20")
    assert res.code == 0, res.err
    hits = [json.loads(line) for line in res.out.splitlines()]
    paths = {h["path"] for h in hits if h["type"] == "hit"}
    assert HEADER in paths or "isa/wgmma_mma_async.md" in paths
    assert not paths & {"include/cute/arch/mma_sm100_umma.hpp", "examples/blackwell/gemm.cu"}
    assert not any(str(h.get("requires", "")).startswith("sm_100") for h in hits)
    everything = run_cli("search", "mma", "--mode", "lexical", "--json", "-k", "20").out
    assert "mma_sm100_umma.hpp" in everything
    # sm_90a-only WGMMA does not run on sm_100 either
    res100 = run_cli("search", "mma", "--arch", "sm_100", "--mode", "lexical", "--json", "-k", "20")
    assert HEADER not in res100.out and "mma_sm100_umma.hpp" in res100.out
    # docs: the tcgen05 section needs sm_100a
    res = run_cli("docs", "tcgen05.mma", "--arch", "sm_90", "--json")
    doc = json.loads(res.out)
    assert res.code == 1 and doc["best"] is None and "sm_100a" in doc["hint"]
    res = run_cli("docs", "tcgen05.mma", "--arch", "sm_100", "--json")
    assert res.code == 0 and json.loads(res.out)["best"]["path"] == "isa/tcgen05_mma.md"
    bad = run_cli("search", "mma", "--arch", "hopper")
    assert bad.code == 2 and "'hopper': expected sm_80" in bad.err and "--arch" in bad.err
    assert len(bad.err.strip().splitlines()) == 1


def test_docs_and_related_tools_carry_links_within_their_budget(
    linked: tuple[Workspace, Repo],
) -> None:
    ws, _ = linked
    tools = ToolSet(ws)
    text = tools.run("docs", {"topic": "wgmma.mma_async", "max_tokens": 800})
    assert "implemented by / used in:" in text
    assert HEADER in text and WRAPPER in text and EXAMPLE in text
    assert len(text) < 800 * 4
    section = ws.docs("wgmma.mma_async", ["ptx"]).best
    assert section is not None
    rel = tools.run("related", {"ref": section.id, "arch": "sm_90"})
    assert "concepts: wgmma.mma_async" in rel and WRAPPER in rel
    with pytest.raises(ToolError):
        tools.run("related", {"ref": "cutlass:../etc/passwd"})


def test_related_works_without_the_ptx_corpus_as_on_the_demo_index(
    isolated_home: Path, tmp_path: Path, run_cli: Callable[..., CliResult]
) -> None:
    """`make demo` indexes no PTX manual: `related` of a wrapper answered "no PTX
    instruction is linked" (exit 1) for every hit, docs/retrieval.md's example too. The
    instruction as the code spells it now stands for itself: the wrapper's header, the
    wrapper and their caller still lead to each other."""
    code = _repo(
        tmp_path / "code",
        {
            HEADER: GMMA_HPP,
            WRAPPER: WRAPPER_PY.format(op="wgmma_mma_async"),
            EXAMPLE: HOPPER_EXAMPLE_PY,
        },
    )
    folder = isolated_home / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cutlass.toml").write_text(CODE_TOML.format(url=code.path))
    ws = Workspace()
    ws.index("cutlass")
    assert "ptx" not in ws.store.corpora()
    wrapper = next(c for c in ws.store.cache("cutlass").chunks_of_file(WRAPPER) if c.defines)
    rel = ws.related(wrapper.id)
    assert rel.concepts == ["wgmma.mma.async"] and rel.sections == []
    assert EXAMPLE in {lk.chunk.path for lk in rel.users}
    assert HEADER in {lk.chunk.path for lk in rel.implementers}
    res = run_cli("related", wrapper.id)
    assert res.code == 0 and "called from" in res.out and EXAMPLE in res.out, res


def test_anchor_and_nvvm_names_resolve_to_their_section() -> None:
    vocab = Vocabulary(
        {
            "wgmma": "wgmma",
            "wgmma_mma_async": "wgmma.mma_async",
            "cp_async": "cp.async",
            "cp_async_bulk_tensor": "cp.async.bulk.tensor",
            "elect_sync": "elect.sync",
        }
    )
    assert _anchor_key("asynchronous-warpgroup-level-matrix-instructions-wgmma-mma") == (
        "wgmma_mma"
    )
    assert vocab.resolve("wgmma_mma") == "wgmma_mma_async"  # an anchor cut short
    assert vocab.resolve("cp_async_bulk_tensor_shared_cluster_global") == "cp_async_bulk_tensor"
    assert vocab.resolve("cp_async_ca_shared_global") == "cp_async"
    assert vocab.resolve("elect") == "elect_sync"
    assert vocab.resolve("tcgen05_mma") is None
    chunk = dedent(
        """
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.L2::cache_hint"
                     " [%0], [%1, {%2, %3}], [%4], %5;" :: "r"(a));
        """
    )
    from ctxkernel.corpus import Chunk

    found = extract(Chunk("c", "include/x.hpp", 1, 3, chunk, language="cpp"))
    assert [m.key for m in found] == ["cp_async_bulk_tensor_2d_shared_cluster_global_l2_cache_hint"]
