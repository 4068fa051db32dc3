"""One line per timed check of a ``bench/harness/check_speed.py`` JSON: wall, per-rung seconds and
where the benchmark rung's seconds went (its workers, steps, and inside the worker).

    python3 bench/harness/speed_rows.py OUT.json
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _short(d: dict[str, Any] | None) -> str:
    return " ".join(f"{k}={v:.2f}" for k, v in (d or {}).items() if isinstance(v, int | float))


def rows(doc: dict[str, Any]) -> list[str]:
    out = []
    for part in ("longlived", "oneshot", "bench"):
        for name, block in (doc.get(part) or {}).items():
            if not isinstance(block, dict):
                continue
            firsts = block.get("firsts") or [block.get("first")]
            labelled = [("first", r) for r in firsts] + list(enumerate(block.get("rows") or [], 1))
            for tag, row in labelled:
                if not isinstance(row, dict):
                    continue
                out.append(
                    f"{part}/{name}/{tag}: wall {row.get('wall_s')} ok {row.get('ok')} | rungs "
                    f"{_short(row.get('rung_s'))} | correctness {_short(row.get('correctness_s'))}"
                    f" | bench {_short(row.get('bench_s'))}"
                )
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        print("\n".join(rows(json.load(fh))))
