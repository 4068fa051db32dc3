"""bench/README.md is the lab's index: every script under bench/ is listed there."""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_bench_readme_lists_every_script() -> None:
    text = (BENCH / "README.md").read_text()
    scripts = sorted(p.name for p in BENCH.iterdir() if p.suffix in (".py", ".sh"))
    missing = [name for name in scripts if f"`{name}`" not in text]
    assert not missing, f"bench/README.md does not list: {missing}"
    named = {word.strip("`") for word in text.split() if word.startswith("`") and
             word.rstrip("`,)").endswith((".py", ".sh"))}  # fmt: skip
    gone = sorted(n.rstrip("`,)") for n in named if not (BENCH / n.rstrip("`,)")).exists())
    assert not gone, f"bench/README.md lists scripts that are not there: {gone}"
