"""Probe (issue 31): does a contextual query encoder move real users' questions?

The default index holds static vectors (a distilled, context-free model: a chunk is the
weighted mean of its tokens' rows), cheap enough to index CUTLASS in under a minute on
2 cores. A transformer on the document side costs ~10x that (bench/RESULTS.md, issue 17).
The query side is different: one short question per search. This probe asks whether a
contextual encoder *of the question only*, mapped into the static document space, finds
answers the static query vector misses:

1. Pairs the corpora give, no question of any evaluation set: a docs or tutorial section's
   title and its section; a docstring's first sentence and the code it documents.
2. The frozen MiniLM (the offline ``minilm`` embedder) encodes each pair's text; a linear
   map into the static space is trained with a softmax over every chunk of the pair's
   corpus (the static vectors as they are in the index: the documents do not change).
3. At search time the static query vector is mixed with the mapped contextual one
   (``beta``: its weight; 0 is the index as it ships) and ``ctxkernel eval`` runs the sets.

Nothing here ships; it prints the numbers and the query encoder's cost per question.

  python bench/retrieval/contextual_query_probe.py --index-dir INDEX \\
      --set rdev=bench/queries/real-users-dev.jsonl --set edev=bench/queries/eval-dev.jsonl \\
      --betas 0,0.5,1,2
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

WORD = re.compile(r"[A-Za-z][A-Za-z]+")


def first_sentence(text: str) -> str:
    text = " ".join(text.split())
    cut = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return cut[:300]


def pairs_of(db_path: Path, per_corpus: int, rng: random.Random) -> list[tuple[str, int]]:
    """(text, chunk row) pairs: section titles of prose chunks, docstrings of code ones."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    found: dict[str, int] = {}
    for row, title, doc in db.execute("SELECT row, title, doc FROM chunks"):
        for text in (title or "", first_sentence(doc or "")):
            if len(WORD.findall(text)) >= 4 and text not in found:
                found[text] = int(row)
    db.close()
    items = sorted(found.items())
    rng.shuffle(items)
    return items[:per_corpus]


def train_map(
    feats: Any, targets: Any, docs: Any, epochs: int, lr: float, temperature: float
) -> Any:
    """W (contextual dim -> static dim) by a softmax over every document of the corpus."""
    import torch

    w = torch.nn.Linear(feats.shape[1], docs.shape[1], bias=False)
    opt = torch.optim.Adam(w.parameters(), lr=lr)
    n = len(feats)
    for epoch in range(epochs):
        order = torch.randperm(n)
        total = 0.0
        for start in range(0, n, 256):
            idx = order[start : start + 256]
            q = torch.nn.functional.normalize(w(feats[idx]), dim=1)
            logits = q @ docs.T / temperature
            loss = torch.nn.functional.cross_entropy(logits, targets[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        print(f"  epoch {epoch + 1}: loss {total / n:.3f}", file=sys.stderr)
    return w


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index-dir", required=True, type=Path)
    ap.add_argument("--set", action="append", default=[], help="NAME=PATH (repeatable)")
    ap.add_argument("--betas", default="0,0.5,1,2")
    ap.add_argument("--per-corpus", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import numpy as np
    import torch

    from ctxkernel.embedders.embed import StaticEmbedder, get_embedder

    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    minilm = get_embedder("minilm")
    lexical = args.index_dir / "lexical"
    feats, targets, blocks = [], [], []
    offset = 0
    for corpus_dir in sorted(p for p in lexical.iterdir() if (p / "dense").is_dir()):
        rows = np.load(corpus_dir / "dense" / "rows.npy")
        matrix = np.load(corpus_dir / "dense" / "matrix.npy").astype(np.float32)
        where = {int(r): i for i, r in enumerate(rows)}
        pairs = [
            (t, where[r])
            for t, r in pairs_of(corpus_dir / "meta.sqlite", args.per_corpus, rng)
            if r in where
        ]
        t0 = time.perf_counter()
        vecs = minilm.embed([t for t, _ in pairs])
        print(
            f"{corpus_dir.name}: {len(pairs)} pairs, {len(rows)} chunks, encoded in "
            f"{time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
        )
        feats.append(torch.tensor(np.asarray(vecs, dtype=np.float32)))
        targets.append(torch.tensor([offset + i for _, i in pairs]))
        blocks.append(torch.tensor(matrix))
        offset += len(rows)
    # one softmax over every corpus's chunks: the map is shared, a question names no corpus
    docs = torch.nn.functional.normalize(torch.cat(blocks), dim=1)
    x = torch.cat(feats)
    y = torch.cat(targets)
    t0 = time.perf_counter()
    w = train_map(x, y, docs, args.epochs, args.lr, args.temperature)
    print(f"trained on {len(x)} pairs in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    w.eval()

    plain = StaticEmbedder.embed_query
    state = {"beta": 0.0}
    cost: list[float] = []

    def mixed(self: Any, query: str) -> Any:
        base = np.asarray(plain(self, query), dtype=np.float32)
        if not state["beta"]:
            return base
        started = time.perf_counter()
        ctx = minilm.embed([query])[0]
        with torch.no_grad():
            mapped = w(torch.tensor(np.asarray(ctx, dtype=np.float32))[None])[0].numpy()
        cost.append((time.perf_counter() - started) * 1000)
        mapped /= np.linalg.norm(mapped) or 1.0
        unit = base / (np.linalg.norm(base) or 1.0)
        out = unit + state["beta"] * mapped
        return out / (np.linalg.norm(out) or 1.0)

    StaticEmbedder.embed_query = mixed  # type: ignore[method-assign]
    from ctxkernel.cli.evaluate import eval_cmd

    summary: dict[str, Any] = {}
    for beta in [float(b) for b in args.betas.split(",")]:
        state["beta"] = beta
        cost.clear()
        argv = [*args.set, "--index-dir", str(args.index_dir), "--modes", "hybrid,dense"]
        argv += ["--by", "kind", "--json"]
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            eval_cmd.main(argv, standalone_mode=False)
        for line in buf.getvalue().splitlines():
            rec = json.loads(line)
            if rec.get("type") != "eval":
                continue
            key = f"{rec['set']} {rec['mode']} {rec['group']}"
            summary.setdefault(key, {})[beta] = (
                round(rec["recall@10"], 3),
                round(rec["mrr@10"], 3),
            )
        if cost:
            cost.sort()
            print(
                f"beta {beta}: query encoder p50 {cost[len(cost) // 2]:.1f} ms "
                f"p95 {cost[int(len(cost) * 0.95)]:.1f} ms over {len(cost)} questions",
                file=sys.stderr,
            )
    betas = args.betas.split(",")
    print("| set mode group | " + " | ".join(f"beta {b}" for b in betas) + " |")
    print("|---" * (len(betas) + 1) + "|")
    for key, by_beta in summary.items():
        cells = [f"{r:.3f} / {m:.3f}" for r, m in by_beta.values()]
        print(f"| {key} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
