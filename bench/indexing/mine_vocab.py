"""Mine the identifier list of the static embedder (``ctxkernel/data/static_vocab.txt``)
from indexed corpora: names that the base model's tokenizer cuts into pieces
(``make_tiled_copy``, ``tl.dot``, ``cp.async.bulk.tensor``, ``wgmma``), kept when several
chunks use them, defined names first, with a share of the list per corpus.

usage:
  python bench/indexing/mine_vocab.py --index-dir DIR [--corpus cutlass=4500 --corpus triton=2000 ...]

Writes the list (one name a line) to ctxkernel/data/static_vocab.txt unless --out is given.
The list is a set of names, not upstream text; re-run it when the corpora change much.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

_IDENT = re.compile(r"\.?[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_0-9][A-Za-z0-9_]*)*")
# receivers and locals that name nothing an agent would ask for
_NOISE_PREFIX = ("self.", "args.", "cls.", "p.", "ctx.", "kwargs.", "_")
_QUOTAS = {"cutlass": 4500, "triton": 2000, "ptx": 1500}


def candidates(db: sqlite3.Connection) -> tuple[Counter[str], set[str], int]:
    """(chunks using each name, names the corpus defines, chunks)."""
    used: Counter[str] = Counter()
    n = 0
    for (text,) in db.execute("SELECT text FROM chunks"):
        n += 1
        names = set()
        for raw in _IDENT.findall(text or ""):
            name = raw.replace("::", ".").strip(".").lower()
            if keep(name):
                names.add(name)
        used.update(names)
    defined = {str(r[0]).lower() for r in db.execute("SELECT name FROM defines")}
    return used, defined, n


def keep(name: str) -> bool:
    if not 3 <= len(name) <= 40 or name.startswith(_NOISE_PREFIX):
        return False
    letters = sum(c.isalpha() for c in name)
    if letters < 2 or name.startswith("0x") or re.fullmatch(r"[a-z]?\d+[a-z]?", name):
        return False
    return all(part for part in name.split("."))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--index-dir",
        required=True,
        help="an index with the corpora (lexical/<corpus>/meta.sqlite)",
    )
    ap.add_argument(
        "--corpus", action="append", default=[], metavar="NAME=N", help="corpus and its share"
    )
    ap.add_argument("--min-chunks", type=int, default=3, help="least chunks that must use a name")
    ap.add_argument("--out", default=str(ROOT / "ctxkernel" / "data" / "static_vocab.txt"))
    args = ap.parse_args()
    from tokenizers import Tokenizer

    from ctxkernel.embedders.static import base_model

    _, folder = base_model()
    bert = Tokenizer.from_file(str(folder / "tokenizer.json"))
    bert.no_padding()
    bert.no_truncation()
    quotas = dict(_QUOTAS)
    for spec in args.corpus:
        name, _, n = spec.partition("=")
        quotas[name] = int(n or 0)
    chosen: dict[str, None] = {}
    for corpus, quota in quotas.items():
        db_path = Path(args.index_dir) / "lexical" / corpus / "meta.sqlite"
        if not db_path.is_file():
            print(f"skip {corpus}: not indexed in {args.index_dir}", file=sys.stderr)
            continue
        used, defined, n = candidates(sqlite3.connect(db_path))
        pieces = {w: len(bert.encode(w, add_special_tokens=False).ids) for w in used}
        ranked = sorted(
            (w for w, c in used.items() if pieces[w] > 1 and c >= args.min_chunks),
            key=lambda w: (w not in defined, -used[w], w),
        )
        taken = 0
        for w in ranked:
            if taken >= quota:
                break
            if w not in chosen:
                chosen[w] = None
                taken += 1
        print(f"{corpus}: {n} chunks, {len(ranked)} candidates, took {taken}", file=sys.stderr)
    header = (
        "# Identifiers that get vectors of their own in the static embedder (ctxkernel/embedders/static.py).\n"
        "# Mined by bench/indexing/mine_vocab.py from the indexed cutlass, triton and ptx corpora: names the\n"
        "# base tokenizer cuts into pieces, used by several chunks, defined names first.\n"
    )
    Path(args.out).write_text(header + "\n".join(sorted(chosen)) + "\n")
    print(f"wrote {len(chosen)} names to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
