"""Reading the headers of planted cheats and bad candidates (``# expect: rung: words``).

Shared by the tests and by anyone who wants to run one planted cheat by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# one small shape per problem keeps CPU runs to a few programs each
SMALL_SHAPES: dict[str, list[dict[str, Any]]] = {
    "vector_add": [{"n": 1000}],
    "softmax": [{"m": 7, "n": 33}],
    "rmsnorm": [{"m": 5, "n": 33}],
    "matmul_bf16": [{"m": 32, "k": 64, "n": 48}],
    "matmul_fp32": [{"m": 32, "k": 64, "n": 48}],
    # tall-and-wide fixtures: their full SHAPES run in test_signal_and_budgets.py
    "softmax_rows": [{"m": 16, "n": 100}],
    "layernorm_rows": [{"m": 12, "n": 100}],
    "softmax_long_row": [{"m": 2, "n": 20000}],
}


@dataclass
class Expectation:
    path: Path
    rung: str
    words: str
    problem: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    title: str = ""

    @property
    def rungs(self) -> tuple[str, ...]:
        """The rungs allowed to catch it: ``run|correctness`` where either may see it first."""
        return tuple(name.strip() for name in self.rung.split("|"))

    def named_in(self, reason: str) -> bool:
        """Whether ``reason`` carries the expected words; ``NaN/Inf | outside atol`` lists
        alternatives (one per rung that may catch it)."""
        return any(w.strip().lower() in reason.lower() for w in self.words.split(" | "))


def _value(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def read_expectation(path: Path) -> Expectation:
    head = path.read_text().splitlines()[:8]
    fields: dict[str, str] = {}
    title = ""
    for line in head:
        match = re.match(r"#\s*(expect|problem|options)\s*:\s*(.*)$", line)
        if match:
            fields[match.group(1)] = match.group(2).strip()
        elif line.startswith("# cheat") and not title:
            title = line.lstrip("# ").strip()
    if "expect" not in fields:
        raise ValueError(f"{path}: no '# expect: <rung>: <words>' line")
    rung, _, words = fields["expect"].partition(":")
    options = {}
    for item in fields.get("options", "").split():
        key, _, raw = item.partition("=")
        options[key] = _value(raw)
    return Expectation(path, rung.strip(), words.strip(), fields.get("problem"), options, title)


def problem_path(name: str) -> Path:
    for base in (EXAMPLES, FIXTURES):
        if (base / name).is_dir():
            return base / name
    raise FileNotFoundError(name)
