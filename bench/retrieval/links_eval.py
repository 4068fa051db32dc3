"""Evaluate the concept links and the architecture filter on a real index.

Links: for each instruction of ``bench/queries/links-judged.jsonl`` (``judge_links.py``),
``docs INSTRUCTION`` is asked and every link it shows is judged by opening the file in
the local mirror: a wrapper (CuTe C++ / CuTeDSL / Gluon) is right when its file is a
judged implementer of that instruction; a caller (an example, a helper) is right when its
lines call a name defined in a judged implementer (or in a helper that calls one) or
write the instruction in an asm string. Coverage: the instructions whose shown links
hold a right CuTe C++, CuTeDSL and Gluon link (each where the judged set has one).
Recall: the judged implementer files found among all links of the instruction.

Search identity (``--search-digest``): every query of the given sets through ``search``
in each mode (hybrid, lexical, dense), top-10 hits (their whole JSON) hashed per set and mode, so
two indexes (one without and one with link-only sources) can be compared without reading
any query's answers (the test split's included).

Arch: the evaluation queries that ask about sm_90 work (Hopper, sm90, wgmma, TMA...),
top-10 hybrid search over all corpora, without and with ``--arch sm_90``: how many hits
need sm_100 or later.

    python bench/retrieval/links_eval.py --index-dir INDEX --cutlass MIRROR/cutlass \
        --triton MIRROR/triton [--json out.json]
    python bench/retrieval/links_eval.py --index-dir INDEX --search-digest \
        bench/queries/eval-dev.jsonl bench/queries/eval-test.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from ctxkernel import arch as archmod
from ctxkernel.links.resolve import Link, Vocabulary, for_concepts
from ctxkernel.links.table import table
from ctxkernel.workspace import Workspace

QUERIES = Path(__file__).resolve().parents[1] / "queries"  # bench/queries
GROUPS = {"cutlass C++": "cutlass_cpp", "CuTeDSL": "cutedsl", "triton/gluon": "gluon"}
SM90_WORDS = re.compile(r"hopper|sm_?90|wgmma|gmma|\btma\b|warpgroup", re.I)
EXTRA_SM90_QUERIES = [
    "warp-specialized GEMM with TMA and wgmma on Hopper",
    "TMA load into shared memory with an mbarrier on sm_90",
    "warpgroup MMA accumulate in registers sm90",
    "Hopper persistent GEMM with a tile scheduler",
    "setmaxnreg register reallocation producer consumer warpgroups Hopper",
    "sm90 pipeline async producer consumer mbarrier",
    "Hopper FP8 GEMM example",
    "flash attention on Hopper with wgmma",
    "TMA store from shared memory to global on Hopper",
    "cluster launch and distributed shared memory sm_90",
]


class Mirror:
    def __init__(self, repos: dict[str, Path]) -> None:
        self.repos = repos

    @lru_cache(maxsize=4096)  # noqa: B019 - one Mirror per run
    def text(self, corpus: str, path: str) -> str:
        repo = self.repos.get(corpus)
        if repo is None:
            return ""
        out = subprocess.run(
            ["git", "-C", str(repo), "show", f"HEAD:{path}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return out.stdout

    def lines(self, corpus: str, path: str, start: int, end: int) -> str:
        return "\n".join(self.text(corpus, path).splitlines()[start - 1 : end])


def _defines(text: str, name: str) -> bool:
    n = re.escape(name)
    pattern = rf"(?:def|class|struct)\s+{n}\b|using\s+{n}\s*=|^\s*{n}\s*=|\b{n}\s*\([^;{{]*\)\s*(?:const\s*)?\{{"
    return re.search(pattern, text, re.M) is not None


def judge_link(link: Link, row: dict[str, Any], mirror: Mirror) -> bool:
    c = link.chunk
    judged_files = {f for key in GROUPS.values() for f in row[key]}
    if link.role == "implements" and link.group in GROUPS:
        return c.path in row[GROUPS[link.group]]
    body = mirror.lines(c.corpus, c.path, c.start_line, c.end_line)
    instr = row["instruction"]
    spelled = (instr, "nvvm." + instr.replace(".", "_"), "#" + instr.replace(".", "-"))
    if link.group == "examples" and any(s in body for s in spelled):
        return True  # the example writes the instruction, its nvvm op or its manual anchor
    name = link.via.rsplit(":", 1)[-1]
    if not name or re.search(rf"\b{re.escape(name)}\b", body) is None:
        return False
    corpus_files = [
        f for f in judged_files if (c.corpus == "triton") == f.startswith("python/triton")
    ]
    if any(_defines(mirror.text(c.corpus, f), name) for f in corpus_files):
        return True
    if link.how == "call2":
        # a helper: defined somewhere that calls a judged wrapper; accept when the
        # helper's defining file (any file of the corpus holding "def name") calls one
        return _helper_calls_wrapper(mirror, c.corpus, name, corpus_files)
    return False


def _helper_calls_wrapper(mirror: Mirror, corpus: str, name: str, files: list[str]) -> bool:
    repo = mirror.repos.get(corpus)
    if repo is None:
        return False
    out = subprocess.run(
        ["git", "-C", str(repo), "grep", "-l", "-E", rf"def {name}\(", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    wrappers = set()
    for f in files:
        wrappers.update(re.findall(r"(?:def|class)\s+(\w+)", mirror.text(corpus, f)))
    for line in out.stdout.splitlines():
        text = mirror.text(corpus, line.split(":", 1)[1])
        if any(re.search(rf"\b{re.escape(w)}\b", text) for w in wrappers if len(w) > 5):
            return True
    return False


def eval_links(ws: Workspace, rows: list[dict[str, Any]], mirror: Mirror) -> dict[str, Any]:
    vocab = Vocabulary.of(ws.store)
    per: list[dict[str, Any]] = []
    shown_total = shown_right = 0
    judged_files = found_files = 0
    for row in rows:
        instr = row["instruction"]
        t0 = time.perf_counter()
        result = ws.docs(instr)
        ms = (time.perf_counter() - t0) * 1000
        verdicts = [(lk, judge_link(lk, row, mirror)) for lk in result.links if lk.group != "ptx"]
        shown_total += len(verdicts)
        shown_right += sum(ok for _, ok in verdicts)
        have = {g: any(ok and lk.group == g for lk, ok in verdicts) for g in GROUPS}
        exists = {g: bool(row[key]) for g, key in GROUPS.items()}
        concept = vocab.concept_of(instr)
        everything = for_concepts(ws.store, [concept], vocab=vocab) if concept else []
        paths = {lk.chunk.path for lk in everything if lk.role == "implements"}
        judged = {f for key in GROUPS.values() for f in row[key]}
        judged_files += len(judged)
        found_files += len(judged & paths)
        wrong = [
            f"{lk.chunk.id} ({lk.role} via {lk.via or lk.how})" for lk, ok in verdicts if not ok
        ]
        per.append(
            {
                "instruction": instr,
                "concept": vocab.name(concept) if concept else None,
                "best": result.best.id if result.best else None,
                "shown": len(verdicts),
                "right": sum(ok for _, ok in verdicts),
                "has": have,
                "exists": exists,
                "examples": sum(ok and lk.group == "examples" for lk, ok in verdicts),
                "wrong": wrong,
                "judged_files": len(judged),
                "found_files": len(judged & paths),
                "docs_ms": round(ms, 1),
            }
        )
    n = len(per)

    def share(pred: Any) -> float:
        return round(sum(1 for p in per if pred(p)) / n, 3) if n else 0.0

    return {
        "instructions": n,
        "precision_shown": round(shown_right / shown_total, 3) if shown_total else None,
        "links_shown": shown_total,
        "cpp_and_dsl_strict": share(lambda p: p["has"]["cutlass C++"] and p["has"]["CuTeDSL"]),
        "cpp_dsl_gluon_where_exists": share(
            lambda p: all(p["has"][g] or not p["exists"][g] for g in GROUPS)
        ),
        "cpp_where_exists": share(
            lambda p: p["has"]["cutlass C++"] or not p["exists"]["cutlass C++"]
        ),
        "dsl_where_exists": share(lambda p: p["has"]["CuTeDSL"] or not p["exists"]["CuTeDSL"]),
        "gluon_where_exists": share(
            lambda p: p["has"]["triton/gluon"] or not p["exists"]["triton/gluon"]
        ),
        "with_example": share(lambda p: p["examples"] > 0),
        "recall_judged_files": round(found_files / judged_files, 3) if judged_files else None,
        "docs_ms_median": sorted(p["docs_ms"] for p in per)[n // 2] if n else None,
        "per_instruction": per,
    }


def sm90_queries() -> list[str]:
    out: list[str] = []
    for name in ("eval-test.jsonl", "eval-dev.jsonl", "handwritten.jsonl"):
        for line in (QUERIES / name).read_text().splitlines():
            if not line.strip() or line.startswith("//"):
                continue
            q = json.loads(line).get("query", "")
            if SM90_WORDS.search(q) and not re.search(r"blackwell|sm_?10\d|tcgen05|umma", q, re.I):
                out.append(q)
    return list(dict.fromkeys(out + EXTRA_SM90_QUERIES))


def eval_arch(ws: Workspace, queries: list[str], k: int = 10) -> dict[str, Any]:
    needs = archmod.Resolver(ws.store)

    def sm100_only(hits: list[Any]) -> int:
        count = 0
        for h in hits:
            need = needs.of(h.chunk)
            if need is not None and need.sm >= 100:
                count += 1
        return count

    plain = filtered = hits_plain = hits_filtered = 0
    for q in queries:
        a = ws.search(q, k=k).hits
        b = ws.search(q, k=k, arch="sm_90").hits
        plain += sm100_only(a)
        filtered += sm100_only(b)
        hits_plain += len(a)
        hits_filtered += len(b)
    return {
        "queries": len(queries),
        "k": k,
        "sm100_only_hits_unfiltered": plain,
        "sm100_only_hits_arch_sm90": filtered,
        "hits_unfiltered": hits_plain,
        "hits_arch_sm90": hits_filtered,
    }


def search_digest(ws: Workspace, files: list[Path], k: int = 10) -> dict[str, Any]:
    """Per query set and mode: how many queries, and the sha256 of the whole JSON of their
    top-k hits, in order: equal digests mean byte-identical search results."""
    out: dict[str, Any] = {}
    for file in files:
        queries = [
            json.loads(x)["query"]
            for x in file.read_text().splitlines()
            if x.strip() and not x.startswith("//")
        ]
        for mode in ("hybrid", "lexical", "dense"):
            h = hashlib.sha256()
            for q in queries:
                hits = ws.search(q, k=k, mode=mode).hits
                h.update(json.dumps([x.to_json() for x in hits], sort_keys=True).encode() + b"\n")
            out[f"{file.stem}/{mode}"] = {"queries": len(queries), "sha256": h.hexdigest()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-dir", required=True)
    ap.add_argument("--cutlass", type=Path)
    ap.add_argument("--triton", type=Path)
    ap.add_argument(
        "--search-digest",
        type=Path,
        nargs="+",
        metavar="QUERIES",
        help="Only hash the search results of these query sets (see above), and exit.",
    )
    ap.add_argument("--judged", type=Path, default=QUERIES / "links-judged.jsonl")
    ap.add_argument("--no-arch", action="store_true", help="Skip the search part.")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    ws = Workspace(args.index_dir)
    if args.search_digest:
        print(json.dumps(search_digest(ws, args.search_digest), indent=1))
        return
    if args.cutlass is None or args.triton is None:
        ap.error("--cutlass and --triton are needed to judge the links")
    rows = [json.loads(x) for x in args.judged.read_text().splitlines() if x.strip()]
    mirror = Mirror({"cutlass": args.cutlass, "triton": args.triton})
    t0 = time.perf_counter()
    for corpus in ws.store.corpora():
        table(ws.store.synced_cache(corpus)).close()  # built (or current) first
    build_s = time.perf_counter() - t0
    report: dict[str, Any] = {"links_ready_s": round(build_s, 1)}
    report["links"] = eval_links(ws, rows, mirror)
    if not args.no_arch:
        report["arch"] = eval_arch(ws, sm90_queries())
    summary = {k: v for k, v in report["links"].items() if k != "per_instruction"}
    print(json.dumps({**report, "links": summary}, indent=1))
    for p in report["links"]["per_instruction"]:
        miss = [g for g in GROUPS if p["exists"][g] and not p["has"][g]]
        print(
            f"{p['instruction']:34} shown {p['shown']:2} right {p['right']:2} "
            f"files {p['found_files']}/{p['judged_files']}"
            + (f" missing {','.join(miss)}" if miss else "")
            + (f" wrong {p['wrong'][:3]}" if p["wrong"] else "")
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
