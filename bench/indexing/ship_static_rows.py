"""Write ``ctxkernel/data/static_identifier_rows.npz``: the base transformer's rows of the
default static recipe's padded identifiers, so that ``ctxkernel embedder build`` computes
only the base tokens (a build in a minute or two on 2 cores).

    python bench/indexing/ship_static_rows.py            # the default recipe, the bundled MiniLM
    python bench/indexing/ship_static_rows.py --check 50 # recompute 50 rows and compare

Deterministic for a given base model copy (its fingerprint is in the file); a build with
another copy, or another vocabulary's sequences, computes those rows itself.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from ctxkernel.embedders import distill as static_distill
    from ctxkernel.embedders import static as static_embed
    from ctxkernel.progress import Progress

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(static_distill.SHIPPED_ROWS))
    p.add_argument("--check", type=int, default=0, help="recompute N random shipped rows")
    args = p.parse_args()
    rec = static_embed.recipe("default")
    _, folder = static_embed.base_model()
    out = Path(args.out)
    if args.check:
        import numpy as np

        prepared = static_distill.prepare(rec, folder)
        ids = prepared["ids"]
        shipped = static_distill.shipped_rows(rec.base_fingerprint, ids)
        chosen = random.Random(0).sample(sorted(shipped), min(args.check, len(shipped)))
        fresh = static_distill.contextual_rows(prepared["model"], [ids[i] for i in chosen])
        worst = max(
            float(np.abs(fresh[j] - shipped[i]).max() / (np.abs(fresh[j]).max() + 1e-9))
            for j, i in enumerate(chosen)
        )
        long = sum(1 for s in ids if len(s) > static_distill.SHIP_MIN_TOKENS)
        print(
            json.dumps(
                {
                    "shipped": len(shipped),
                    "long_sequences": long,
                    "checked": len(chosen),
                    "max_rel_diff": worst,
                }
            )
        )
        return 0 if len(shipped) == long and worst < 2e-3 else 1
    t = time.perf_counter()
    meta = static_distill.write_shipped_rows(rec, folder, out, Progress())
    meta.update(
        seconds=round(time.perf_counter() - t, 1), bytes=out.stat().st_size, recipe=rec.digest
    )
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
