"""Link-only corpus sources (``[files] link_only``): files chunked and stored for the
concept links, reachable by ``show``, ``related`` and ``docs``'s links, and never a
search candidate — search answers byte for byte as if they were not indexed, in every
mode; a re-index of a changed or removed link-only file updates its links."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ctxkernel.links.table import table
from ctxkernel.workspace import Workspace

from .conftest import CliResult, Repo
from .test_links import GMMA_HPP, PTX_TOML, WGMMA_MD, _repo

CODE_TOML = """\
name = "cutlass"
description = "CuTe atoms, CUTLASS arch wrappers and examples the tests write."

[source]
git = "{url}"
ref = "main"

[links]
blob = "https://example.invalid/blob/{{ref}}/{{path}}#L{{start}}-L{{end}}"

[files]
include = ["include/cute/**", "python/**", "examples/**"{extra_include}]
{link_only}

[chunkers]
"**/*.py" = "python"

[kinds]
"examples/**" = "example"

[limits]
min_lines = 1
"""

SETMAXNREG_MD = """\
# 9.7.19.5. Miscellaneous Instructions: setmaxnreg

Hint to change the number of registers owned by the warp.

Syntax

    setmaxnreg.action.sync.aligned.u32 imm-reg-count;

Target ISA Notes

Requires `sm_90a`.
"""

GRIDDEP_MD = """\
# 9.7.13.16. Parallel Synchronization and Communication Instructions: griddepcontrol

Control execution of dependent grids.

Syntax

    griddepcontrol.action;
"""

REG_RECONFIG_H = """\
#pragma once
namespace cutlass::arch {{

template <uint32_t RegCount>
CUTLASS_DEVICE void warpgroup_reg_alloc() {{
  asm volatile("{instr}.inc.sync.aligned.u32 %0;\\n" : : "n"(RegCount));
}}

template <uint32_t RegCount>
CUTLASS_DEVICE void warpgroup_reg_dealloc() {{
  asm volatile("{instr}.dec.sync.aligned.u32 %0;\\n" : : "n"(RegCount));
}}

}}  // namespace cutlass::arch
"""

WS_GEMM_CU = """\
// A warp-specialized Hopper GEMM example for the tests.
#include <cutlass/arch/reg_reconfig.h>

__global__ void hopper_ws_gemm_kernel(float* out) {
  if (threadIdx.x < 128) {
    cutlass::arch::warpgroup_reg_dealloc<40>();
  } else {
    cutlass::arch::warpgroup_reg_alloc<232>();
    out[threadIdx.x] = 0.0f;
  }
}
"""

ARCH = "include/cutlass/arch/reg_reconfig.h"
EXAMPLE = "examples/hopper/ws_gemm.cu"
QUERIES = (
    "setmaxnreg register reallocation warpgroup_reg_alloc",
    "warpgroup_reg_dealloc",
    "wgmma mma_async bf16 descriptor",
    "warp-specialized Hopper GEMM kernel",
)


def _definition(home: Path, url: Path, *, link_only: bool = False, searched: bool = False) -> None:
    folder = home / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    text = CODE_TOML.format(
        url=url,
        extra_include=', "include/cutlass/**"' if searched else "",
        link_only='link_only = ["include/cutlass/arch/**"]' if link_only else "",
    )
    (folder / "cutlass.toml").write_text(text)


@pytest.fixture
def corpora(isolated_home: Path, tmp_path: Path) -> tuple[Workspace, Repo, Path]:
    ptx = _repo(
        tmp_path / "ptx",
        {
            "isa/wgmma_mma_async.md": WGMMA_MD,
            "isa/setmaxnreg.md": SETMAXNREG_MD,
            "isa/griddepcontrol.md": GRIDDEP_MD,
        },
    )
    code = _repo(
        tmp_path / "code",
        {
            "include/cute/arch/mma_sm90_gmma.hpp": GMMA_HPP,
            ARCH: REG_RECONFIG_H.format(instr="setmaxnreg"),
            EXAMPLE: WS_GEMM_CU,
        },
    )
    (isolated_home / "corpora").mkdir(parents=True, exist_ok=True)
    (isolated_home / "corpora" / "ptx.toml").write_text(PTX_TOML.format(url=ptx.path))
    ws = Workspace()
    ws.index("ptx")
    return ws, code, isolated_home


def _answers(ws: Workspace) -> list[str]:
    """Every query's hits in every mode, as the JSON an agent gets."""
    out = []
    for query in QUERIES:
        for mode in ("hybrid", "lexical", "dense"):
            hits = ws.search(query, k=20, mode=mode).hits
            out.append(json.dumps([h.to_json() for h in hits], sort_keys=True))
    return out


def _link_paths(ws: Workspace, topic: str) -> dict[str, str]:
    result = ws.docs(topic)
    return {lk.chunk.path: lk.group for lk in result.links}


def test_link_only_file_is_linked_and_shown_but_never_searched(
    corpora: tuple[Workspace, Repo, Path], run_cli: Callable[..., CliResult]
) -> None:
    ws, code, home = corpora
    _definition(home, code.path)  # the arch folder is not indexed at all
    ws.index("cutlass")
    without = _answers(ws)
    assert ARCH not in _link_paths(ws, "setmaxnreg")

    # searched like any file, the header is what these queries find (the check can fail)
    _definition(home, code.path, searched=True)
    ws.index("cutlass")
    assert any(ARCH in answer for answer in _answers(ws))

    # link-only: out of the searched tables again, and search answers as before, byte
    # for byte, in every mode (no terms, no vectors, no document counts of its own)
    _definition(home, code.path, link_only=True)
    report = ws.index("cutlass")
    assert report.link_only_chunks > 0
    assert _answers(ws) == without
    for mode in ("hybrid", "lexical", "dense"):
        res = run_cli("search", "warpgroup_reg_alloc setmaxnreg", "--mode", mode, "--json")
        assert ARCH not in res.out and res.code in (0, 1), res.err

    # linked both ways: the PTX section lists it, its hit id leads back to the section
    # and to the example that calls it
    res = run_cli("docs", "setmaxnreg", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    by_path = {link["path"]: link for link in doc["links"]}
    assert by_path[ARCH]["group"] == "cutlass C++"
    assert by_path[ARCH]["role"] == "implements" and by_path[ARCH]["how"] == "asm"
    assert by_path[ARCH]["url"].startswith("https://example.invalid/blob/")
    assert by_path[EXAMPLE]["role"] == "uses"
    arch_id = by_path[ARCH]["id"]
    rel = ws.related(arch_id)
    assert rel.concepts == ["setmaxnreg"]
    assert [s.chunk.path for s in rel.sections] == ["isa/setmaxnreg.md"]
    # the example calls both wrappers (two chunks): it is a caller of each
    for wrapper in ws.store.cache("cutlass").chunks_of_file(ARCH):
        assert EXAMPLE in {lk.chunk.path for lk in ws.related(wrapper.id).users}, wrapper.id
    example = next(c for c in ws.store.cache("cutlass").chunks_of_file(EXAMPLE) if c.defines)
    assert ARCH in {lk.chunk.path for lk in ws.related(example.id).implementers}
    res = run_cli("related", arch_id, "--json")
    assert res.code == 0, res.err
    assert ("section", "isa/setmaxnreg.md") in {
        (lk["relation"], lk["path"]) for lk in json.loads(res.out)["links"]
    }
    shown = run_cli("show", arch_id)
    assert shown.code == 0, shown.err
    assert "setmaxnreg.inc.sync.aligned.u32" in shown.out


def test_reindexing_a_changed_link_only_file_updates_its_links(
    corpora: tuple[Workspace, Repo, Path],
) -> None:
    ws, code, home = corpora
    _definition(home, code.path, link_only=True)
    ws.index("cutlass")
    assert ARCH in _link_paths(ws, "setmaxnreg")
    assert ARCH not in _link_paths(ws, "griddepcontrol")

    code.write(ARCH, REG_RECONFIG_H.format(instr="griddepcontrol"))
    code.commit("the wrapper now issues griddepcontrol")
    ws.update("cutlass")
    assert ARCH not in _link_paths(ws, "setmaxnreg")
    assert _link_paths(ws, "griddepcontrol")[ARCH] == "cutlass C++"
    for mode in ("lexical", "dense", "hybrid"):  # still never searched
        hits = ws.search("griddepcontrol warpgroup_reg_alloc", ["cutlass"], mode=mode).hits
        assert ARCH not in {h.chunk.path for h in hits}

    code.remove(ARCH)
    code.commit("the wrapper is gone")
    ws.update("cutlass")
    assert ARCH not in _link_paths(ws, "griddepcontrol")
    cache = ws.store.synced_cache("cutlass")
    db = table(cache)
    ids = {row[0] for row in db.execute("SELECT chunk_id FROM links")}
    db.close()
    assert ids  # the example's other links remain
    assert all(ARCH not in i for i in ids)
    assert set(cache.chunks_by_ids(sorted(ids))) == ids  # no link names a chunk gone
    assert cache.link_count() == 0
