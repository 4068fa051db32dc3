"""Mine the independent evaluation set for ``ctxkernel eval`` from local mirrors.

usage::

    python bench/retrieval/mine_queries.py --cutlass MIRROR/cutlass --triton MIRROR/triton \\
        --ptx MIRROR/ptx91 --seed 12 [--index-dir INDEX] [--out bench/queries]

Writes ``eval-dev.jsonl`` (tune on it) and ``eval-test.jsonl`` (report it; do not read
its misses while tuning), split half and half within each corpus x kind, fixed by the seed.

Query kinds and how each is judged (never from this project's search results):

- ``error``: every ``raise X(msg)`` / ``assert c, msg`` in the corpus's Python files
  (read with ``ast``) and every ``static_assert(c, "msg")`` in its C++ files; the message
  is rendered as a user sees it (plausible values in the format fields, the exception
  type in front, sometimes Triton's ``CompilationError: at L:C:`` or the DSL's
  diagnostic wording around it). Targets: the raising statement's lines, plus every
  other site with the same message skeleton (all raise/assert sites of the corpus are
  parsed) and every other code line holding all its literal pieces (grep).
- ``api``: public names of the DSL / language namespaces (``cute.*``, ``cute.nvgpu.*``,
  ``tl.*``, ``gl.*``, ``triton.testing.*``...), resolved through the package's imports
  to their definitions (all of them, when several bindings exist); C++ ``cute::`` structs
  with every definition site. Target ``path#name``.
- ``example``: example files/folders with their docstring's, ``\\brief``'s or README's
  first sentence reworded into an engineer's request. Targets: the example's file (or its
  folder when the other files there are helpers), plus examples whose descriptions
  are near-identical.
- ``ptx``: PTX section titles and first sentences reworded into questions about the
  instruction's semantics. Targets: the section file, plus sections titled the same.
- ``howto``: hand-written questions from ``bench/queries/handwritten.jsonl``, each judged
  by opening the files.

Every target must name a file the corpus definition (corpora/*.toml) indexes; with
``--index-dir``, each must also match a chunk of that index (which chunks exist, never
how they rank). Rewordings go through ``bench/retrieval/mine_text.py``'s paraphrase table and
must not repeat a long run of the source text.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import mine_text as mt
from mine_code import CorpusFiles, Mined, git_head, mine_api, mine_errors, unique

from ctxkernel.corpus import Chunk, Hit
from ctxkernel.evaluate import Target

QUERIES = Path(__file__).resolve().parents[1] / "queries"  # bench/queries

# how many mined queries to draw per corpus x kind (before dropping near-duplicates)
QUOTAS: dict[tuple[str, str], int] = {
    ("cutlass", "error"): 62,
    ("cutlass", "api"): 56,
    ("cutlass", "example"): 46,
    ("triton", "error"): 44,
    ("triton", "api"): 44,
    ("triton", "example"): 26,
    ("ptx", "ptx"): 96,
}


# --- example kernels ----------------------------------------------------------------------

HELPER_NAME = re.compile(
    r"(^__init__|util|helper|common|host|conftest|test_|_test|scheduler|reference|setup|"
    r"bench|sched_extension|^_)",
    re.I,
)
LEAD = re.compile(
    r"^(?:this (?:example|kernel|file|tutorial|class|module|script|sample|program)\s+"
    r"(?:demonstrates|shows|implements|is|provides|illustrates)(?: how to| an?| the)?|"
    r"an? (?:simple |basic |minimal )?(?:example|tutorial|sample)\s+(?:of|for|that|demonstrating|"
    r"showing|on)(?: how to)?|example (?:of|demonstrating|showing)(?: how to)?|"
    r"in this tutorial,? you will (?:learn (?:how )?to |learn about |write )?|"
    r"demonstrates(?: how to)?|implements|shows how to)\s*",
    re.I,
)
EXAMPLE_TEMPLATES = (
    "example of {c}",
    "find an example kernel: {c}",
    "is there an example of {c}",
    "show me sample code for {c}",
    "{c} example",
    "where is the example for {c}",
    "example kernel: {c}",
)


def py_description(text: str) -> str:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return ""
    doc = ast.get_docstring(tree)
    if not doc:
        for stmt in tree.body:
            if (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                doc = stmt.value.value
                break
    if not doc:
        for stmt in tree.body:
            if isinstance(stmt, ast.ClassDef) and ast.get_docstring(stmt):
                doc = ast.get_docstring(stmt)
                break
    return doc or ""


def rst_first_sentence(doc: str) -> str:
    """Title and first prose sentence of an RST/Markdown docstring, without markup."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", doc.strip()) if p.strip()]
    title, body = "", ""
    for p in paras:
        lines = p.splitlines()
        if len(lines) >= 2 and re.fullmatch(r"[=\-~^#*]{3,}", lines[1].strip()):
            title = title or lines[0].strip()
            rest = "\n".join(lines[2:]).strip()
            if rest:
                body = rest
                break
            continue
        if p.startswith(("..", "```", "-", "*", "$", ">>>", "|", "python ")) or p.startswith("#"):
            continue
        body = p
        break
    sentence = mt.first_sentence(body) if body else ""
    if title and (not sentence or len(sentence.split()) < 5):
        return f"{title}: {sentence}".strip(": ")
    return sentence


def triton_description(doc: str, path: str) -> str:
    """A tutorial's title, or its "you will write ..." sentence; Gluon named when it is one."""
    paras = [p.strip() for p in re.split(r"\n\s*\n", doc.strip()) if p.strip()]
    if not paras:
        return ""
    lines = paras[0].splitlines()
    title = re.sub(r"\{sup\}`[^`]*`", "", lines[0]).strip() if len(lines) > 1 else ""
    title = mt.strip_markup(title)
    body = "\n".join(lines[2:]).strip() or (paras[1] if len(paras) > 1 else "")
    sentence = mt.first_sentence(body)
    lang = "Gluon" if "/gluon/" in path else "Triton"
    if re.match(r"In this tutorial, you will write", sentence):
        core = re.sub(r"^In this tutorial, you will write\s+", "", sentence)
    else:
        core = title
    if not core:
        return ""
    return core if lang.lower() in core.lower() else f"{core} in {lang}"


def example_core(description: str, rng: random.Random) -> str:
    c = LEAD.sub("", description.strip()).strip()
    c = mt.apply_synonyms(c, rng)
    c = mt.tidy_core(c, rng)
    c = mt.shorten(c, 16).rstrip(" ,;:.")
    return mt.soft_lower(c)


def mine_examples(cf: CorpusFiles, seed: int, quota: int) -> list[Mined]:
    items: list[tuple[str, str, str]] = []  # (description, target, origin)
    if cf.name == "cutlass":
        items += _cutedsl_examples(cf)
        items += _cpp_examples(cf)
    else:
        for path in cf.paths:
            if re.match(r"python/(tutorials|examples)/(gluon/)?[^/]+\.py$", path):
                if HELPER_NAME.search(Path(path).stem):
                    continue
                d = triton_description(py_description(cf.text(path) or ""), path)
                if d:
                    items.append((d, path, f"docstring of {path}"))
    items = [it for it in items if len(it[0].split()) >= (4 if cf.name == "cutlass" else 2)]
    rng = random.Random(f"{seed}:examples:{cf.name}")
    chosen = rng.sample(items, len(items))
    out: list[Mined] = []
    bags = [mt.content_words(LEAD.sub("", d)) for d, _, _ in items]
    for desc, target, origin in chosen:
        if len(out) >= quota:
            break
        r = random.Random(f"{seed}:{target}")
        query = ""
        for _ in range(6):
            core = example_core(desc, r)
            cand = r.choice(EXAMPLE_TEMPLATES).format(c=core)
            if (
                cf.name == "cutlass"
                and "examples/python/" in target
                and "dsl" not in cand.lower()
                and r.random() < 0.35
            ):
                cand += " in CuTeDSL"
            reworded = cf.name != "cutlass" or mt.verbatim_share(core, desc) < 1.0
            if mt.verbatim_share(cand, desc) <= 0.75 and reworded:
                query = cand
                break
        if not query:
            continue
        mine = mt.content_words(LEAD.sub("", desc))
        targets = [target] + [
            t
            for (d, t, _), bag in zip(items, bags, strict=True)
            if t != target and mt.jaccard(mine, bag) >= 0.75
        ]
        out.append(Mined(cf.name, "example", query, unique(targets), origin))
    return out


def _cutedsl_examples(cf: CorpusFiles) -> list[tuple[str, str, str]]:
    out = []
    by_dir: dict[str, list[str]] = defaultdict(list)
    for p in cf.paths:
        if p.startswith("examples/python/CuTeDSL/") and p.endswith(".py"):
            by_dir[str(Path(p).parent)].append(p)
    for folder, files in sorted(by_dir.items()):
        mains = [f for f in files if not HELPER_NAME.search(Path(f).stem)]
        for f in mains:
            d = rst_first_sentence(py_description(cf.text(f) or ""))
            if not d:
                readme = f"{folder}/README.md"
                if readme in cf.paths:
                    d = rst_first_sentence(re.sub(r"^#+\s*", "", cf.text(readme) or "", flags=re.M))
            if not d or d.startswith(("**", "Example:")):
                continue
            target = f"{folder}/*" if len(mains) == 1 and len(files) > 1 else f
            out.append((d, target, f"docstring of {f}"))
    return out


_BRIEF = re.compile(r"\\brief\s+(.*?)(?:\n\s*\n|\*/)", re.S)


def _cpp_examples(cf: CorpusFiles) -> list[tuple[str, str, str]]:
    out = []
    folders = sorted({p.split("/")[1] for p in cf.paths if re.match(r"examples/\d+_[^/]+/", p)})
    for folder in folders:
        files = [p for p in cf.paths if p.startswith(f"examples/{folder}/")]
        mains = [p for p in files if p.endswith(".cu")]
        main = next((p for p in mains if Path(p).stem == folder), mains[0] if mains else "")
        d = ""
        if main:
            m = _BRIEF.search(cf.text(main) or "")
            if m:
                d = mt.first_sentence(re.sub(r"\s+", " ", m.group(1)))
        readme = f"examples/{folder}/README.md"
        if (not d or len(d.split()) < 4) and readme in files:
            d = rst_first_sentence(re.sub(r"^#+\s*", "", cf.text(readme) or "", flags=re.M))
        if d:
            out.append((d, f"examples/{folder}/*", f"\\brief of {main or readme}"))
    return out


# --- PTX sections --------------------------------------------------------------------------

GENERIC_TITLES = re.compile(
    r"^(target isa notes?|ptx isa notes?|examples?|notes?|overview|syntax|semantics|"
    r"description|release notes|notices|.*changes in ptx isa version.*|trademarks|copyright)$",
    re.I,
)
SKIP_FOLDERS = ("13_release_notes", "14_notices")
VERB_BASE = {"copies": "copy", "applies": "apply", "does": "do", "has": "have", "is": "be"}


def _verb_base(word: str) -> str:
    w = word.lower()
    if w in VERB_BASE:
        return VERB_BASE[w]
    if w.endswith(("sses", "shes", "ches", "xes")):
        return w[:-2]
    return w[:-1] if w.endswith("s") and not w.endswith("ss") else w


def ptx_sections(cf: CorpusFiles) -> list[tuple[str, str, str]]:
    """(path, title without number, first sentence)."""
    out = []
    for path in cf.paths:
        if path.startswith(SKIP_FOLDERS):
            continue
        lines = cf.lines(path)
        if not lines or not lines[0].startswith("#"):
            continue
        title = mt.strip_markup(lines[0].lstrip("# "))
        sentence = ""
        para: list[str] = []
        in_code = False
        for line in lines[1:]:
            s = line.strip()
            if s.startswith("```"):
                in_code = not in_code
                continue
            if in_code or s.startswith(("#", "|", "![", "Copy to clipboard")):
                continue
            if not s:
                if para:
                    break
                continue
            if re.fullmatch(r"`[^`]+`(,\s*`[^`]+`)*", s) or s in (
                "Syntax",
                "Description",
                "Semantics",
            ):
                continue
            para.append(s)
        if para:
            sentence = mt.first_sentence(" ".join(para))
        out.append((path, title, sentence))
    return out


def mine_ptx(cf: CorpusFiles, seed: int, quota: int) -> list[Mined]:
    sections = [
        s
        for s in ptx_sections(cf)
        if (
            not GENERIC_TITLES.match(s[1].split(": ")[-1]) and " " in s[1].strip()
        )  # a one-word title or a figure's slug says too little
        or (": " in s[1] and not GENERIC_TITLES.match(s[1].split(": ")[-1]))
    ]
    by_title: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for sec in sections:
        by_title[sec[1].split(": ")[-1].lower()].append(sec)
    instr = [s for s in sections if ": " in s[1] and "9_instruction_set" in s[0]]
    regs = [s for s in sections if s[0].startswith("10_special_registers")]
    dirs = [s for s in sections if s[0].startswith("11_directives") and ": " in s[1]]
    rest = [s for s in sections if s not in instr and s not in regs and s not in dirs]
    rng = random.Random(f"{seed}:ptx")
    plan = [(instr, round(quota * 0.58)), (regs, round(quota * 0.08)), (dirs, round(quota * 0.1))]
    plan.append((rest, quota - sum(n for _, n in plan)))
    out: list[Mined] = []
    for pool, n in plan:
        usable = [s for s in pool if s[2] and len(s[2].split()) >= 4]
        for path, title, sentence in rng.sample(usable, min(n, len(usable))):
            r = random.Random(f"{seed}:{path}")
            query, scope = ptx_query(path, title, sentence, r)
            if not query or mt.verbatim_share(query, f"{title} {sentence}") > 0.8:
                continue
            family = title.rpartition(": ")[0]
            same = by_title[title.split(": ")[-1].lower()]
            if scope == "family":
                same = [s for s in same if s[1].rpartition(": ")[0] == family]
            elif scope == "sentence":
                same = [s for s in same if s[2] == sentence]
            targets = [path] + [s[0] for s in same if s[0] != path]
            out.append(Mined("ptx", "ptx", query, unique(targets), f"section {title}"))
    return out


def ptx_query(path: str, title: str, sentence: str, rng: random.Random) -> tuple[str, str]:
    """A question and which same-titled sections also answer it: "name" (any section of
    that name), "family" (same family too), "sentence" (same first sentence too) or "self"."""
    family, _, name = title.rpartition(": ")
    first = sentence.split()[0] if sentence else ""
    verb_first = bool(re.fullmatch(r"[A-Z][a-z]+s", first)) and first not in ("This", "Is", "Its")
    s = mt.apply_synonyms(sentence, rng).rstrip(".")
    s = re.sub(r"^(?:a|an|the)\s+", "", s, flags=re.I)
    s_low = mt.lower_first(s)
    if family and path.startswith("10_special_registers"):
        if rng.random() < 0.5:
            return f"which PTX special register holds the {s_low}", "sentence"
        return f"what is in {name} in PTX, {s_low}?", "name"
    if family and path.startswith("11_directives"):
        if verb_first and rng.random() < 0.6:
            return f"which PTX directive {s_low}", "sentence"
        return f"what does the {name} directive mean in PTX", "name"
    if family:
        r = rng.random()
        fam = mt.soft_lower(mt.apply_synonyms(family.replace(" Instructions", ""), rng))
        if verb_first and r < 0.45:
            return f"which PTX instruction {s_low}?", "sentence"
        if verb_first and r < 0.75:
            rest = " ".join(s.split()[1:])
            return f"how does {name} {_verb_base(first)} {rest}?", "name"
        if rng.random() < 0.4:
            return f"what does the PTX {name} instruction do", "name"
        return rng.choice(("semantics of {n} in PTX ({f})", "PTX {f}: how does {n} behave")).format(
            n=name, f=fam
        ), "family"
    t = mt.soft_lower(mt.apply_synonyms(title, rng))
    return rng.choice(
        (
            "what does the PTX ISA say about {t}",
            "PTX {t}: how does it work",
            "explain {t} in PTX",
            "rules for {t} in PTX",
        )
    ).format(t=t), "self"


# --- checking, merging, splitting ---------------------------------------------------------


class Checker:
    """Targets must name files the corpus indexes (and chunks of the index, when given)."""

    def __init__(self, files: dict[str, CorpusFiles], index_dir: Path | None) -> None:
        self.files = files
        self.index = None
        if index_dir is not None:
            from ctxkernel.store import Store

            self.index = Store(index_dir)
        self._chunks: dict[tuple[str, str], list[Chunk]] = {}

    def chunks(self, corpus: str, path: str) -> list[Chunk] | None:
        if self.index is None:
            return None
        key = (corpus, path)
        if key not in self._chunks:
            self._chunks[key] = self.index.cache(corpus).chunks_of_file(path)
        return self._chunks[key]

    def ok(self, corpus: str, target: str) -> bool:
        t = Target.parse(target)
        cf = self.files[corpus]
        paths = [p for p in cf.paths if p == t.path or Target(t.path).matches(_fake_hit(corpus, p))]
        if not paths:
            return False
        if self.index is None:
            return True
        return any(t.matches(Hit(c)) for p in paths for c in self.chunks(corpus, p) or [])


def _fake_hit(corpus: str, path: str) -> Hit:
    return Hit(Chunk(corpus, path, 1, 1, ""))


def check_all(queries: list[Mined], checker: Checker, stats: Counter[str]) -> list[Mined]:
    out = []
    for q in queries:
        good = [t for t in q.relevant if checker.ok(q.corpus, t)]
        if not good and q.kind == "api":
            good = [_head_range(checker, q.corpus, t) for t in q.relevant]
            good = [t for t in good if t and checker.ok(q.corpus, t)]
        stats[f"dropped_target:{q.kind}"] += len(q.relevant) - len(good)
        if not good:
            stats[f"dropped_query:{q.corpus}:{q.kind}"] += 1
            continue
        q.relevant = good
        out.append(q)
    return out


def _head_range(checker: Checker, corpus: str, target: str) -> str:
    """``path#name`` that no chunk titles -> the first lines of the definition."""
    t = Target.parse(target)
    if not t.name:
        return ""
    lines = checker.files[corpus].lines(t.path)
    rx = re.compile(
        rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(t.name)}\b|^{re.escape(t.name)}\s*[:=]"
    )
    for i, line in enumerate(lines, 1):
        if rx.search(line):
            return f"{t.path}:{i}-{min(len(lines), i + 4)}"
    return ""


def load_handwritten(path: Path) -> list[Mined]:
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        row = json.loads(line)
        out.append(
            Mined(
                row["corpus"],
                row.get("kind", "howto"),
                row["query"],
                list(row["relevant"]),
                row.get("origin", f"hand-written, {path.name}:{n}"),
                row.get("id", ""),
            )
        )
    return out


def dedupe(queries: list[Mined], stats: Counter[str]) -> list[Mined]:
    out: list[Mined] = []
    bags: list[set[str]] = []
    seen: set[str] = set()
    for q in queries:
        norm = " ".join(mt.words(q.query))
        if norm in seen or mt.near_duplicate(q.query, bags):
            stats[f"near_duplicate:{q.corpus}:{q.kind}"] += 1
            continue
        seen.add(norm)
        bags.append(mt.content_words(q.query))
        out.append(q)
    return out


def assign_ids(queries: list[Mined]) -> None:
    for q in queries:
        if not q.id:
            h = hashlib.sha1(f"{q.corpus}|{q.query}".encode()).hexdigest()[:8]
            q.id = f"{q.corpus[:2]}-{q.kind}-{h}"


def split(queries: list[Mined], seed: int) -> tuple[list[Mined], list[Mined]]:
    strata: dict[tuple[str, str], list[Mined]] = defaultdict(list)
    for q in queries:
        strata[(q.corpus, q.kind)].append(q)
    dev, test = [], []
    for key in sorted(strata):
        group = sorted(strata[key], key=lambda q: q.id)
        random.Random(f"{seed}:split:{key}").shuffle(group)
        half = (len(group) + 1) // 2
        dev += group[:half]
        test += group[half:]
    return dev, test


# --- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cutlass", type=Path, required=True)
    ap.add_argument("--triton", type=Path, required=True)
    ap.add_argument("--ptx", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument(
        "--index-dir", type=Path, default=None, help="check targets against this index's chunks"
    )
    ap.add_argument("--out", type=Path, default=QUERIES)
    ap.add_argument("--handwritten", type=Path, default=QUERIES / "handwritten.jsonl")
    ap.add_argument(
        "--spot-check",
        type=int,
        default=0,
        metavar="N",
        help="print N mined judgments with the lines they name",
    )
    args = ap.parse_args(argv)

    mirrors = {"cutlass": args.cutlass, "triton": args.triton, "ptx": args.ptx}
    files = {name: CorpusFiles.load(name, root) for name, root in mirrors.items()}
    stats: Counter[str] = Counter()
    mined: list[Mined] = []
    for name in ("cutlass", "triton"):
        cf = files[name]
        mined += mine_errors(cf, args.seed, QUOTAS[(name, "error")], stats)
        mined += mine_api(cf, args.seed, QUOTAS[(name, "api")])
        mined += mine_examples(cf, args.seed, QUOTAS[(name, "example")])
    mined += mine_ptx(files["ptx"], args.seed, QUOTAS[("ptx", "ptx")])
    hand = load_handwritten(args.handwritten) if args.handwritten.is_file() else []

    checker = Checker(files, args.index_dir)
    hand = check_all(hand, checker, stats)
    mined = check_all(mined, checker, stats)
    everything = dedupe(hand + mined, stats)
    assign_ids(everything)
    dev, test = split(everything, args.seed)

    if args.spot_check:
        spot_check(everything, files, args.spot_check, args.seed)
    header = _header(args, mirrors, everything, dev, test, stats)
    for name, rows in (("eval-dev.jsonl", dev), ("eval-test.jsonl", test)):
        split_name = name.split("-")[1].split(".")[0]
        lines = [h.replace("{SPLIT}", split_name) for h in header]
        lines += [json.dumps(q.to_json(), ensure_ascii=False) for q in rows]
        (args.out / name).write_text("\n".join(lines) + "\n")
    counts = Counter((q.corpus, q.kind) for q in everything)
    print(f"wrote {len(dev)} dev + {len(test)} test queries to {args.out}", file=sys.stderr)
    for key in sorted(counts):
        print(f"  {key[0]:8} {key[1]:8} {counts[key]}", file=sys.stderr)
    for key in sorted(stats):
        print(f"  {key}: {stats[key]}", file=sys.stderr)
    return 0


def _header(args, mirrors, everything, dev, test, stats) -> list[str]:  # type: ignore[no-untyped-def]
    cmd = (
        "python bench/retrieval/mine_queries.py --cutlass MIRROR/cutlass --triton MIRROR/triton "
        f"--ptx MIRROR/ptx91 --seed {args.seed}" + (" --index-dir INDEX" if args.index_dir else "")
    )
    heads = []
    upstream = {
        "cutlass": "NVIDIA/cutlass",
        "triton": "triton-lang/triton (lightseekorg mirror)",
        "ptx": "PTX ISA 9.1 Markdown (yayueLaurazhou/flashinfer-bench)",
    }
    for name, root in mirrors.items():
        mirror, up = git_head(root)
        heads.append(f"{name}: {upstream[name]} {up or mirror[:12]}")
    by = Counter((q.corpus, q.kind) for q in everything)
    per = ", ".join(f"{c}/{k} {n}" for (c, k), n in sorted(by.items()))
    n_hand = sum(1 for q in everything if q.kind == "howto")
    return [
        "// Independent evaluation set for `ctxkernel eval`, {SPLIT} split. "
        "dev: tune on it. test: report it; do not read its misses while tuning.",
        f"// Built by: {cmd}",
        f"// Corpora (local mirrors, not committed): {'; '.join(heads)}.",
        f"// {len(everything)} queries ({len(everything) - n_hand} mined, {n_hand} hand-written), "
        f"{len(dev)} dev / {len(test)} test, halves of each corpus x kind: {per}.",
        "// Judgments: never from this project's search results. error: the raising statement's "
        "lines plus every raise/assert/static_assert site with the same message skeleton (all "
        "sites of the corpus parsed) and code lines holding all its literal pieces (grep). "
        "api: the name resolved through the package's imports to every definition. "
        "example: the example's file/folder plus examples with near-identical descriptions. "
        "ptx: the section file plus sections with the same title. howto: written by hand, "
        "each target opened and read; alternatives found by grep over the corpus.",
        "// Every target names a file the corpus definition indexes"
        + (" and matches a chunk of the index it was checked against" if args.index_dir else "")
        + ".",
        "// Spot check (2026-12-01): 30 mined judgments drawn by --spot-check 30 and 12 more "
        "error judgments drawn at random were opened by hand; every target was the raising "
        "statement, the definition, the example or the section asked about. Rendered field "
        "values are plausible, not always realistic (a byte count shown as 3).",
    ]


def spot_check(queries: list[Mined], files: dict[str, CorpusFiles], n: int, seed: int) -> None:
    rng = random.Random(f"{seed}:spot")
    sample = rng.sample([q for q in queries if q.kind != "howto"], n)
    for q in sample:
        print(f"\n## {q.id} [{q.kind}] {q.query}\n   origin: {q.origin}", file=sys.stderr)
        for t in q.relevant[:4]:
            tt = Target.parse(t)
            lines = files[q.corpus].lines(tt.path) if "*" not in tt.path else []
            if tt.start:
                snippet = lines[tt.start - 1 : min(tt.end, tt.start + 3)]
            elif tt.name:
                snippet = [
                    ln
                    for ln in lines
                    if re.search(
                        rf"\b(def|class)\s+{re.escape(tt.name)}\b|^{re.escape(tt.name)}\s*=", ln
                    )
                ][:2]
            else:
                snippet = lines[:2]
            print(f"   -> {t}", file=sys.stderr)
            for ln in snippet:
                print(f"        {ln[:150]}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
