"""bench/README.md is the lab's index: every script under bench/ is listed there, by its
path from bench/ (``harness/check_speed.py``), and every script it lists is there."""

from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
DATA = {"queries", "candidates", "traces"}  # what the scripts read, not scripts
SCRIPT = re.compile(r"`([\w./-]+\.(?:py|sh))`")


def scripts() -> list[str]:
    """Every .py and .sh under bench/, data folders and hidden or cache folders aside."""
    out = []
    for path in BENCH.rglob("*"):
        rel = path.relative_to(BENCH)
        if path.suffix not in (".py", ".sh") or not path.is_file():
            continue
        if rel.parts[0] in DATA or any(p.startswith((".", "__")) for p in rel.parts[:-1]):
            continue
        out.append(rel.as_posix())
    return sorted(out)


def test_bench_readme_lists_every_script() -> None:
    text = (BENCH / "README.md").read_text()
    found = scripts()
    assert "harness/check_speed.py" in found and "baseline.py" in found  # the walk sees both
    assert len({Path(s).parts[0] for s in found if "/" in s}) >= 5  # one folder per kind
    missing = [name for name in found if f"`{name}`" not in text]
    assert not missing, f"bench/README.md does not list: {missing}"


def test_every_script_bench_readme_names_is_there() -> None:
    named = set(SCRIPT.findall((BENCH / "README.md").read_text()))
    assert len(named) > 40
    gone = sorted(n for n in named if not (BENCH / n).is_file())
    assert not gone, f"bench/README.md lists scripts that are not there: {gone}"
