"""What a static scan reports: each ``Finding`` (rule id and name, severity, line,
message, the source line) and the ``ScanResult`` that holds them with the kernel
functions' line ranges."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Finding:
    rule: str
    name: str
    severity: str  # "error" | "warning"
    line: int
    message: str
    code: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScanResult:
    findings: list[Finding] = field(default_factory=list)
    jit_ranges: list[tuple[int, int]] = field(default_factory=list)
    parsed: bool = True

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]
