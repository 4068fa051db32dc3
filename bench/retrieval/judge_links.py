"""Write the judged set of concept links (``bench/queries/links-judged.jsonl``) from local
mirrors of cutlass and triton: for each PTX instruction, the files that truly emit or
wrap it, found by opening the files (the instruction written in an ``asm`` string, the
``nvvm`` op the DSL lowers to its own name, the PTX manual anchor a CuTeDSL op cites, the
Gluon intrinsic whose lowering emits it), and a few examples that call those wrappers.

Independent of ``ctxkernel.links``: plain ``git grep`` over the mirror's tree, so the
judged set does not inherit the linker's mistakes. Gluon's intrinsics name no PTX in
Python (the C++ lowering emits it); their judgments are written out below, one per
intrinsic, from the modules' docstrings and the ops they build.

    python bench/retrieval/judge_links.py --cutlass MIRROR/cutlass --triton MIRROR/triton \
        --out bench/queries/links-judged.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

# instruction -> (nvvm op names the CuTeDSL uses, anchors' tails)
INSTRUCTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "wgmma.mma_async": ((), ("wgmma-mma",)),
    "wgmma.fence": (("wgmma_fence_aligned",), ()),
    "wgmma.commit_group": (("wgmma_commit_group_sync_aligned",), ()),
    "wgmma.wait_group": (("wgmma_wait_group_sync_aligned",), ()),
    "tcgen05.mma": (("tcgen05_mma",), ("tcgen05-mma-instructions-mma",)),
    "tcgen05.alloc": (("tcgen05_alloc",), ()),
    "tcgen05.dealloc": (("tcgen05_dealloc",), ()),
    "tcgen05.relinquish_alloc_permit": (("tcgen05_relinquish_alloc_permit",), ()),
    "tcgen05.ld": (("tcgen05_ld",), ("tcgen05-ld",)),
    "tcgen05.st": (("tcgen05_st",), ("tcgen05-st",)),
    "tcgen05.cp": (("tcgen05_cp",), ()),
    "tcgen05.commit": (("tcgen05_commit",), ()),
    "tcgen05.wait": (("tcgen05_wait",), ()),
    "tcgen05.fence": (("tcgen05_fence",), ()),
    "cp.async.bulk.tensor": (("cp_async_bulk_tensor\\w*",), ("cp-async-bulk-tensor",)),
    "cp.async.bulk": (("cp_async_bulk_shared_cluster_global",), ("cp-async-bulk",)),
    "cp.async": (("cp_async_shared_global",), ()),
    "cp.async.commit_group": (("cp_async_commit_group",), ()),
    "cp.async.wait_group": (("cp_async_wait_group",), ()),
    "mbarrier.init": (("mbarrier_init",), ()),
    "mbarrier.arrive": (("mbarrier_arrive",), ()),
    "mbarrier.try_wait": (("mbarrier_try_wait_parity",), ()),
    "mbarrier.expect_tx": (("mbarrier_expect_tx",), ()),
    "ldmatrix": (("ldmatrix",), ("ldmatrix",)),
    "stmatrix": (("stmatrix",), ("stmatrix",)),
    "elect.sync": (("elect_sync",), ("elect-sync",)),
    "setmaxnreg": (("setmaxregister",), ()),
    "fence.proxy.async": (("fence_proxy",), ()),
    "mma": (("mma",), ("warp-level-matrix-instructions-mma",)),
    "griddepcontrol": (("griddepcontrol",), ()),
    "clusterlaunchcontrol.try_cancel": (("clusterlaunchcontrol_try_cancel",), ()),
    "tensormap.replace": (("tensormap_replace",), ()),
    "redux.sync": (("redux_sync",), ()),
    "shfl.sync": (("shfl_sync",), ()),
}

# Gluon intrinsics (path under python/triton/experimental/gluon/language/nvidia, name)
# judged by reading each: what op it builds and the instruction its lowering emits.
GLUON: dict[str, list[str]] = {
    "wgmma.mma_async": ["hopper/__init__.py:warpgroup_mma"],
    "wgmma.wait_group": ["hopper/__init__.py:warpgroup_mma_wait"],
    "fence.proxy.async": ["hopper/__init__.py:fence_async_shared"],
    "cp.async.bulk.tensor": [
        "hopper/tma.py:async_copy_global_to_shared",
        "hopper/tma.py:async_copy_shared_to_global",
        "blackwell/tma.py:async_gather",
    ],
    "mbarrier.init": ["ampere/mbarrier.py:init"],
    "mbarrier.arrive": ["ampere/mbarrier.py:arrive", "hopper/mbarrier.py:arrive"],
    "mbarrier.try_wait": ["ampere/mbarrier.py:wait"],
    "mbarrier.expect_tx": ["hopper/mbarrier.py:expect"],
    "cp.async": ["ampere/async_copy.py:async_copy_global_to_shared"],
    "cp.async.commit_group": ["ampere/async_copy.py:commit_group"],
    "cp.async.wait_group": ["ampere/async_copy.py:wait_group"],
    "mma": ["ampere/__init__.py:mma_v2"],
    "tcgen05.mma": ["blackwell/__init__.py:tcgen05_mma"],
    "tcgen05.commit": ["blackwell/__init__.py:tcgen05_commit"],
    "tcgen05.cp": ["blackwell/__init__.py:tcgen05_copy"],
    "tcgen05.alloc": ["blackwell/__init__.py:allocate_tensor_memory"],
    "clusterlaunchcontrol.try_cancel": ["blackwell/clc.py:try_cancel"],
}
GLUON_ROOT = "python/triton/experimental/gluon/language/nvidia/"
# where the C++ asm wrappers are looked for: CuTe's atoms, and the CUTLASS C++ library
# (indexed as a link-only source: corpora/cutlass.toml)
CPP_FOLDERS = ["include/cute", "include/cutlass"]


def git_grep(repo: Path, pattern: str, paths: list[str], fixed: bool = False) -> list[str]:
    args = ["git", "-C", str(repo), "grep", "-l", "-F" if fixed else "-E", "-e", pattern, "HEAD"]
    out = subprocess.run([*args, "--", *paths], capture_output=True, text=True, check=False)
    return sorted({line.split(":", 1)[1] for line in out.stdout.splitlines() if ":" in line})


def ptx_in_asm(instr: str) -> str:
    """An asm string that begins (or continues a line) with the instruction, followed by
    its modifiers (``.sync``) or qualifiers (``tcgen05.wait::ld``), or nothing."""
    return r'"([^"]*[[:space:]{;])?' + re.escape(instr) + r'([.:[:space:];"\\]|$)'


def judge(cutlass: Path, triton: Path, commits: dict[str, str]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for instr, (ops, anchors) in INSTRUCTIONS.items():
        spelled = instr.split(".")[0] if instr == "fence.proxy.async" else instr
        cpp = git_grep(cutlass, ptx_in_asm(instr), CPP_FOLDERS)
        dsl_patterns = [ptx_in_asm(spelled)] + [rf"_?nvvm\.{op}\b" for op in ops]
        dsl_patterns += [
            rf"parallel-thread-execution/(index\.html)?#[a-z0-9-]*{a}([^a-z0-9-]|$)"
            for a in anchors
        ]
        dsl: set[str] = set()
        for pattern in dsl_patterns:
            dsl.update(git_grep(cutlass, pattern, ["python/CuTeDSL"]))
        examples = git_grep(cutlass, ptx_in_asm(instr), ["examples"])
        gluon = []
        for entry in GLUON.get(instr, []):
            rel, name = entry.split(":")
            path = GLUON_ROOT + rel
            if git_grep(triton, rf"^def {name}\(", [path]):
                gluon.append(path)
        rows.append(
            {
                "instruction": instr,
                "cutlass_cpp": cpp,
                "cutedsl": sorted(dsl),
                "gluon": sorted(set(gluon)),
                "gluon_names": [e.split(":")[1] for e in GLUON.get(instr, [])],
                "examples_asm": examples,
                "commits": commits,
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cutlass", type=Path, required=True)
    ap.add_argument("--triton", type=Path, required=True)
    ap.add_argument("--cutlass-upstream", default="7107b05535f8977f5ecb9d01ee203205b1fd9bc4")
    ap.add_argument("--triton-upstream", default="f4fca2c0bc0e19930d2be76bb06ee7b232b60e86")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    commits = {"cutlass": args.cutlass_upstream, "triton": args.triton_upstream}
    rows = judge(args.cutlass, args.triton, commits)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for r in rows:
        print(
            f"{r['instruction']:34} cpp {len(r['cutlass_cpp']):3}  dsl {len(r['cutedsl']):3}  "  # type: ignore[arg-type]
            f"gluon {len(r['gluon'])}  examples {len(r['examples_asm'])}"  # type: ignore[arg-type]
        )


if __name__ == "__main__":
    main()
