"""compute-sanitizer: the command that runs one of its tools around a candidate's call, and
what its text report says.

``TOOLS`` are the four checks, each with its own wall budget (``BUDGET_S``: the tools slow
a kernel by 10-100x, racecheck the most). ``command`` wraps the one-shot worker (the same
one the profile rung wraps in ncu) in ``compute-sanitizer --tool T``, its report going to a
log file in the worker's folder so the candidate's own output never mixes in, and the
worker's PyTorch allocator told not to cache (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``: inside
one cached segment a read past a tensor's end lands in the next tensor and memcheck sees
nothing). ``parse`` reads the report: every line of the tool starts ``========= ``; a
finding is a line at the left margin (``Invalid __global__ read of size 4 bytes``,
``Uninitialized __global__ memory read ...``, ``Error: Race reported between ...``,
``Barrier error detected ...``, ``Program hit cudaError...``), the indented lines under it
its frames (``at kernel+0x70 in file.py:12``, the thread and block, host frames), and
``ERROR SUMMARY: N errors`` the tool's own count. ``summarize`` groups findings by kind,
kernel and source line with their counts, in the few lines an agent reads.

Not yet validated on a GPU: the format is the tool's documented text output, and the
parser's fixture (``tests/harness/fixtures/sanitizer/``) is written by hand in it.
"""

from __future__ import annotations

import glob
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

TOOLS = ("memcheck", "initcheck", "racecheck", "synccheck")
BUDGET_S = {"memcheck": 300.0, "initcheck": 300.0, "racecheck": 420.0, "synccheck": 300.0}
PRINT_LIMIT = 200  # findings the tool itself prints in full (the summary still counts all)
PREFIX = "========="

# "at kernel+0x70 in file.py:12" (the offset always printed; the file and line only with
# line info; a demangled C++ name may hold spaces), else "at kernel" bare
_AT = re.compile(
    r"\bat\s+(?P<where>.+?)\+0x[0-9a-fA-F]+(?:\s+in\s+(?P<file>\S+?):(?P<line>\d+))?(?=\s|$)"
)
_AT_BARE = re.compile(r"\bat\s+(?P<where>[^\s+]+)(?=\s|$)")
_OLD_AT = re.compile(r"\bat\s+0x[0-9a-fA-F]+\s+in\s+(?P<where>\S+)")
_SIZE = re.compile(r"\s+of size \d+ bytes?\b.*$")
# "ERROR SUMMARY: 256 errors", then, past the print limit, a second "ERROR SUMMARY: 56
# errors were not printed" that is not the count; racecheck ends with its own summary
_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?\b(?!\s+were not printed)", re.I)
_RACE_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*\d+\s+hazards?\s+displayed\s*\((\d+)\s+errors?,\s*\d+\s+warnings?\)",
    re.I,
)
_NOT_FINDINGS = (
    "COMPUTE-SANITIZER",
    "ERROR SUMMARY",
    "RACECHECK SUMMARY",
    "LEAK SUMMARY",
    "Target application returned",
    "Error: process didn't terminate",
    "Error: Target application terminated",
)


def find_sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for pattern in (
        "/usr/local/cuda/bin/compute-sanitizer",
        "/usr/local/cuda-*/bin/compute-sanitizer",
        "/opt/nvidia/compute-sanitizer*/compute-sanitizer",
    ):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def log_name(tool: str) -> str:
    return f".sanitize-{tool}.log"


def command(binary: str, tool: str, log_file: str) -> list[str]:
    """The wrapper for the one-shot worker: ``compute-sanitizer --tool TOOL`` writing its
    report to ``log_file``, then ``env`` so the worker's allocator does not cache."""
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r} (one of {', '.join(TOOLS)})")
    return [
        binary,
        "--tool",
        tool,
        "--target-processes",
        "all",
        "--launch-timeout",
        "0",  # the worker imports torch before its first CUDA call: no connect deadline
        "--print-limit",
        str(PRINT_LIMIT),
        "--log-file",
        log_file,
        "env",
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1",
    ]


@dataclass
class Finding:
    """One error the tool reported: what, in which kernel, at which source line."""

    kind: str
    kernel: str | None = None
    where: str | None = None  # file:line, when the kernel was built with line info
    detail: list[str] = field(default_factory=list)

    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.kernel or "?", self.where or "")


@dataclass
class Report:
    tool: str
    findings: list[Finding]
    errors: int | None  # the tool's ERROR SUMMARY (None: no summary, the tool did not finish)

    @property
    def clean(self) -> bool:
        return self.errors == 0 and not self.findings


def _content(line: str) -> str | None:
    """The text after the tool's prefix (indentation kept), None for another line."""
    if not line.startswith(PREFIX):
        return None
    rest = line[len(PREFIX) :]
    return rest[1:] if rest.startswith(" ") else rest


def _location(text: str) -> tuple[str | None, str | None]:
    """(kernel, file:line) of an ``at ...`` frame; (None, None) when the text has none."""
    old = _OLD_AT.search(text)  # an older tool: "at 0x70 in kernel"
    if old:
        return old.group("where"), None
    match = _AT.search(text)
    if match:
        name = match.group("file") or ""
        base = name.rsplit("/", 1)[-1]  # the worker's temp folder says nothing
        where = f"{base}:{match.group('line')}" if match.group("line") else None
        return match.group("where").strip(), where
    bare = _AT_BARE.search(text)
    return (bare.group("where"), None) if bare else (None, None)


_RACE = re.compile(r"\b(Write|Read)\s+access\b")
_API = re.compile(r"^Program hit (\S+).*?API call to (\w+)")


def _kind(headline: str) -> str:
    text = headline.strip()
    if text.startswith("Error: Race reported between"):
        first = _RACE.search(text)
        return f"Race between {first.group(1) if first else '?'} and ? access"
    api = _API.match(text)
    if api:  # a host-side error, after a kernel fault: no kernel of its own
        return f"CUDA API error {api.group(1)} from {api.group(2)}"
    text = re.split(r"\s+at\s+", text, maxsplit=1)[0]
    text = _SIZE.sub("", text)
    return text.rstrip(".: ")[:120]


def parse(text: str, tool: str) -> Report:
    """The tool's text report as findings and its own error count."""
    findings: list[Finding] = []
    errors: int | None = None
    current: Finding | None = None
    for raw in (text or "").splitlines():
        content = _content(raw)
        if content is None or not content.strip():
            current = None if content is not None else current
            continue
        summary = _SUMMARY.search(content) or _RACE_SUMMARY.search(content)
        if summary:
            errors = int(summary.group(1))
            current = None
            continue
        if "SUMMARY:" in content:  # the second line past the print limit
            current = None
            continue
        if not content[0].isspace():  # at the margin: a new finding, or the tool's own line
            if content.startswith(_NOT_FINDINGS):
                current = None
                continue
            current = Finding(kind=_kind(content))
            kernel, where = _location(content)  # racecheck names the location inline
            current.kernel, current.where = kernel, where
            findings.append(current)
            continue
        if current is None:
            continue
        line = content.strip()
        second = _RACE.match(line[4:]) if line.startswith("and ") else None
        if second and current.kind.endswith("and ? access"):  # racecheck's other access
            current.kind = current.kind.replace("and ?", f"and {second.group(1)}")
        if line.startswith("at ") and current.kernel is None:
            current.kernel, current.where = _location(line)
        elif (
            line.startswith(("by thread", "Address", "and is", "and ")) and len(current.detail) < 3
        ):
            current.detail.append(line[:160])
    return Report(tool, findings, errors)


def summarize(report: Report, limit: int = 5) -> dict[str, Any]:
    """Findings grouped by (kind, kernel, source line), most frequent first."""
    groups = Counter(f.key() for f in report.findings)
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "tool": report.tool,
        "errors": report.errors,
        "itemised": len(report.findings),
        "groups": [
            {"kind": k, "kernel": kernel, "where": where or None, "count": n}
            for (k, kernel, where), n in ranked[:limit]
        ],
        "more_groups": max(0, len(ranked) - limit),
    }


def lines(summary: dict[str, Any]) -> list[str]:
    """The compact feedback: one line per group of findings."""
    tool = summary["tool"]
    if summary.get("errors") is None:
        return [f"{tool}: no ERROR SUMMARY (the tool did not finish)"]
    if not summary["groups"]:
        if summary["errors"]:
            return [f"{tool}: {summary['errors']} error(s), none itemised in its report"]
        return [f"{tool}: clean"]
    out = []
    for group in summary["groups"]:
        where = f" at {group['where']}" if group.get("where") else ""
        kernel = f" in {group['kernel']}" if group.get("kernel") not in (None, "?") else ""
        out.append(f"{tool}: {group['count']} x {group['kind']}{kernel}{where}")
    if summary.get("more_groups"):
        out.append(f"{tool}: and {summary['more_groups']} more kind(s) of finding")
    if summary["errors"] and summary["errors"] > summary["itemised"]:
        out.append(f"{tool}: {summary['errors']} error(s) in all (the report itemises fewer)")
    return out


__all__ = [
    "BUDGET_S",
    "TOOLS",
    "Finding",
    "Report",
    "command",
    "find_sanitizer",
    "lines",
    "log_name",
    "parse",
    "summarize",
]
