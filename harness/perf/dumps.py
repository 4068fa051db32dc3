"""Dumps: compiled artefacts written out, disassembled, and read the way an expert reads them.

The parent receives files from the worker (``artifacts.py``), writes them under
``DIR/<kernel>/<version>/``, turns every CUBIN (or extension ``.so``) into SASS with
``cuobjdump -sass``, and reports per kernel: registers, shared memory, local memory and
stack (``cuobjdump -res-usage``), spill stores/loads (``ptxas -v`` on the PTX), and
instruction counts that answer the usual questions -- does the matmul use warpgroup MMA
(``HGMMA``/``wgmma``) on sm_90 or only ``HMMA``; is there local-memory traffic (``LDL``/
``STL``); are global loads 128-bit (``LDG.E.128``) or narrow; TMA (``UTMALDG``) or cp.async
(``LDGSTS``). The tools come from the backends' packages first (``Backend.tool_dirs``:
Triton ships ``cuobjdump``, ``nvdisasm`` and ``ptxas``, so this works on a CPU machine),
then ``PATH``, then ``/usr/local/cuda/bin``. ``report.json`` and ``report.txt`` sum it up.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_RES = re.compile(r"Function\s+(\S+?):\s*\n\s*(REG:.*)")
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")


def _safe(name: str) -> str:
    return _SAFE.sub("_", name).strip("._")[:80] or "kernel"


def tool_dirs() -> list[Path]:
    from ..backends import tool_dirs as backend_tool_dirs

    dirs = backend_tool_dirs()
    dirs += [Path(p) for p in os.environ.get("PATH", "").split(os.pathsep) if p]
    dirs.append(Path("/usr/local/cuda/bin"))
    return dirs


def find_tools(name: str) -> list[str]:
    """Every executable called ``name`` (Triton's first), without duplicates."""
    out: list[str] = []
    for directory in tool_dirs():
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK) and str(path.resolve()) not in out:
            out.append(str(path.resolve()))
    return out


def _run(cmd: list[str], timeout: float = 120.0) -> tuple[int, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout + proc.stderr


def disassemble(binary: Path) -> str | None:
    for tool in find_tools("cuobjdump"):
        rc, out = _run([tool, "-sass", str(binary)])
        if rc == 0 and "Function" in out:
            return out
    for tool in find_tools("nvdisasm"):
        if binary.suffix == ".cubin":
            rc, out = _run([tool, "-c", str(binary)])
            if rc == 0 and out.strip():
                return out
    return None


def resource_usage(binary: Path) -> dict[str, dict[str, int]]:
    """Per function: REG, STACK, SHARED, LOCAL (bytes) from ``cuobjdump -res-usage``."""
    for tool in find_tools("cuobjdump"):
        rc, out = _run([tool, "-res-usage", str(binary)])
        if rc == 0:
            return parse_res_usage(out)
    return {}


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    for name, fields_text in _RES.findall(text):
        values = {}
        for key, value in re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", fields_text):
            values[key] = int(value)
        result[name] = values
    return result


def ptxas_report(ptx: Path) -> dict[str, dict[str, int]]:
    """Per entry: registers, spill stores/loads, stack frame, smem, from ``ptxas -v``. Tries
    each ptxas until one accepts the PTX's ``.version`` (Triton 3.9 emits PTX 9.4)."""
    text = ptx.read_text(errors="replace")
    match = re.search(r"^\s*\.target\s+(\w+)", text, re.MULTILINE)
    arch = match.group(1) if match else "sm_90a"
    tools = find_tools("ptxas-blackwell") + find_tools("ptxas")
    for tool in tools:
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = _run([tool, f"-arch={arch}", "-v", str(ptx), "-o", os.path.join(tmp, "o")])
        if rc == 0:
            return parse_ptxas(out)
    return {}


def parse_ptxas(text: str) -> dict[str, dict[str, int]]:
    result: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        entry = re.search(
            r"(?:Compiling entry function|Function properties for) '?([^'\s]+)'?", line
        )
        if entry:
            current = result.setdefault(entry.group(1), {})
            continue
        if current is None:
            continue
        m = re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line
        )
        if m:
            current.update(
                stack=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3))
            )
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m.group(1))
        m = re.search(r"(\d+) bytes smem", line)
        if m:
            current["smem"] = int(m.group(1))
    return result


def _width(opcode: str) -> int:
    tokens = opcode.split(".")[1:]
    if "128" in tokens:
        return 128
    if "64" in tokens:
        return 64
    if {"U16", "S16"} & set(tokens):
        return 16
    if {"U8", "S8"} & set(tokens):
        return 8
    return 32


def count_sass(sass: str) -> dict[str, Any]:
    opcodes = _INSTR.findall(sass)
    base = Counter(op.split(".")[0] for op in opcodes)
    loads = Counter(_width(op) for op in opcodes if op.startswith("LDG."))
    stores = Counter(_width(op) for op in opcodes if op.startswith("STG."))
    mma = sorted(
        {op for op in opcodes if op.startswith(("HGMMA", "HMMA", "IMMA", "QGMMA", "IGMMA"))}
    )
    return {
        "instructions": len(opcodes),
        "HGMMA": base["HGMMA"] + base["QGMMA"] + base["IGMMA"],
        "HMMA": base["HMMA"] + base["IMMA"],
        "mma_forms": mma[:8],
        "LDL": base["LDL"],
        "STL": base["STL"],
        "LDGSTS": base["LDGSTS"],
        "UTMALDG": base["UTMALDG"],
        "global_loads": {str(k): v for k, v in sorted(loads.items())},
        "global_stores": {str(k): v for k, v in sorted(stores.items())},
    }


def count_ptx(ptx: str) -> dict[str, int]:
    return {
        "wgmma": len(re.findall(r"\bwgmma\.mma_async", ptx)),
        "mma.sync": len(re.findall(r"\bmma\.sync", ptx)),
        "ld.global.v4": len(re.findall(r"\bld\.global(?:\.\w+)*\.v4", ptx)),
        "ld.global": len(re.findall(r"\bld\.global", ptx)),
        "cp.async": len(re.findall(r"\bcp\.async\b(?!\.bulk)", ptx)),
        "cp.async.bulk.tensor": len(re.findall(r"\bcp\.async\.bulk\.tensor", ptx)),
    }


@dataclass
class KernelReport:
    kernel: str
    version: str
    backend: str
    directory: str
    files: list[str] = field(default_factory=list)
    registers: int | None = None
    shared_bytes: int | None = None
    local_bytes: int | None = None
    stack_bytes: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    sass: dict[str, Any] = field(default_factory=dict)
    ptx: dict[str, int] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)  # what each finding is (``classify``)
    arch: int | None = None  # the SM the code was compiled for, when the artefacts say

    def line(self) -> str:
        bits = [f"{self.kernel} [{self.version}]"]
        for label, value in (
            ("regs", self.registers),
            ("smem", self.shared_bytes),
            ("local", self.local_bytes),
            ("stack", self.stack_bytes),
            (
                "spills",
                (self.spill_stores or 0) + (self.spill_loads or 0)
                if self.spill_stores is not None
                else None,
            ),
        ):
            if value is not None:
                bits.append(f"{label}={value}")
        if self.sass:
            loads = ",".join(f"{k}b:{v}" for k, v in self.sass.get("global_loads", {}).items())
            bits.append(f"LDG[{loads or '-'}]")
            if self.sass.get("mma_forms"):
                bits.append("mma=" + "/".join(self.sass["mma_forms"][:2]))
        return " ".join(bits)


# What a finding is, named for the layer that attaches documentation to it (the harness
# itself knows nothing of retrieval): see ``classify``.
SPILLS = "register_spills"
LOCAL_MEMORY = "local_memory"
MMA_WITHOUT_WGMMA = "mma_without_wgmma"
NO_TENSOR_CORES = "no_tensor_cores"
NARROW_LOADS = "narrow_global_loads"
NO_TMA = "no_tma_on_hopper"


def classify(
    report: KernelReport, expect_mma: bool, arch: int | None, mma_hint: str = ""
) -> list[tuple[str, str]]:
    """(code, sentence) of each finding: the code names it (``MMA_WITHOUT_WGMMA``...)."""
    out: list[tuple[str, str]] = []
    spills = (report.spill_stores or 0) + (report.spill_loads or 0)
    if spills:
        out.append(
            (
                SPILLS,
                f"{report.kernel} [{report.version}]: register spills ({report.spill_stores} B stored, {report.spill_loads} B loaded): fewer live values or smaller tiles",
            )
        )
    sass = report.sass
    if sass and (sass.get("LDL") or sass.get("STL")):
        out.append(
            (
                LOCAL_MEMORY,
                f"{report.kernel} [{report.version}]: local-memory traffic in SASS ({sass['LDL']} LDL, {sass['STL']} STL): spills or a dynamically indexed local array",
            )
        )
    elif report.local_bytes:
        out.append(
            (
                LOCAL_MEMORY,
                f"{report.kernel} [{report.version}]: {report.local_bytes} B of local memory per thread",
            )
        )
    hopper = arch is not None and 90 <= arch < 100
    if sass and expect_mma and hopper and not sass.get("HGMMA"):
        if sass.get("HMMA"):
            out.append(
                (
                    MMA_WITHOUT_WGMMA,
                    f"{report.kernel} [{report.version}]: matmul on sm_{arch} without HGMMA/WGMMA: tensor cores only through HMMA (mma.sync), "
                    "which caps well under Hopper's peak; use warpgroup MMA"
                    + (f" ({mma_hint})" if mma_hint else ""),
                )
            )
        else:
            out.append(
                (
                    NO_TENSOR_CORES,
                    f"{report.kernel} [{report.version}]: matmul on sm_{arch} with no tensor-core instruction (no HGMMA/HMMA): it runs on the FP32 pipes",
                )
            )
    loads = {int(k): v for k, v in (sass.get("global_loads") or {}).items()} if sass else {}
    narrow = sum(v for k, v in loads.items() if k <= 32)
    if narrow and not loads.get(128) and not sass.get("LDGSTS") and not sass.get("UTMALDG"):
        out.append(
            (
                NARROW_LOADS,
                f"{report.kernel} [{report.version}]: global loads are narrow ({narrow} of width <= 32 bit, none 128-bit): "
                "vectorize (contiguous elements per thread, 16-byte aligned pointers, sizes divisible by 16)",
            )
        )
    if sass and hopper and sass.get("LDGSTS") and not sass.get("UTMALDG"):
        out.append(
            (
                NO_TMA,
                f"{report.kernel} [{report.version}]: tiles copied with cp.async (LDGSTS) on sm_{arch}, no TMA (UTMALDG): "
                "Hopper's tensor memory accelerator copies whole tiles with one instruction and an mbarrier",
            )
        )
    return out


def _arch_of(text: str) -> int | None:
    m = re.search(r"sm_(\d+)", text)
    return int(m.group(1)) if m else None


def write_dump(
    directory: Path,
    files: list[tuple[dict[str, Any], bytes]],
    backend: str,
    expect_mma: bool,
    notes: list[str] | None = None,
    mma_hint: str = "",
) -> dict[str, Any]:
    """Write the files, disassemble, analyse; returns the summary (also report.json/.txt)."""
    directory.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], Path]]] = {}
    for meta, data in files:
        kernel, version = (
            _safe(str(meta.get("kernel", "kernel"))),
            _safe(str(meta.get("version", "v"))),
        )
        folder = directory / kernel / version
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / _safe(str(meta.get("name", f"{kernel}.{meta.get('kind', 'bin')}")))
        path.write_bytes(data)
        groups.setdefault((kernel, version), []).append((meta, path))
    reports: list[KernelReport] = []
    sass_found = False
    for (kernel, version), items in sorted(groups.items()):
        report = KernelReport(kernel, version, backend, str(directory / kernel / version))
        report.files = sorted(p.name for _, p in items)
        by_kind = {str(m.get("kind")): p for m, p in items}
        binary = by_kind.get("cubin") or by_kind.get("so")
        meta_path = by_kind.get("json")
        if meta_path is not None:
            try:
                shared = json.loads(meta_path.read_text()).get("shared")
                report.shared_bytes = int(shared) if shared is not None else None
            except (ValueError, TypeError, AttributeError):
                pass
        arch = None
        ptx_path = by_kind.get("ptx")
        if ptx_path is not None:
            ptx_text = ptx_path.read_text(errors="replace")
            report.ptx = count_ptx(ptx_text)
            target = re.search(r"^\s*\.target\s+(\S+)", ptx_text, re.MULTILINE)
            arch = _arch_of(target.group(1)) if target else None
            entries = ptxas_report(ptx_path)
            if entries:
                first = max(entries.values(), key=lambda e: e.get("registers", 0))
                report.registers = first.get("registers")
                report.spill_stores = sum(e.get("spill_stores", 0) for e in entries.values())
                report.spill_loads = sum(e.get("spill_loads", 0) for e in entries.values())
                report.stack_bytes = max(e.get("stack", 0) for e in entries.values())
        if binary is not None:
            sass = disassemble(binary)
            if sass:
                sass_found = True
                sass_path = binary.with_suffix(".sass")
                sass_path.write_text(sass)
                report.files.append(sass_path.name)
                report.sass = count_sass(sass)
                arch = arch or _arch_of(sass)
            usage = resource_usage(binary)
            if usage:
                regs = max(u.get("REG", 0) for u in usage.values())
                report.registers = report.registers or regs
                static_smem = max(u.get("SHARED", 0) for u in usage.values())
                report.shared_bytes = max(report.shared_bytes or 0, static_smem)
                report.local_bytes = max(u.get("LOCAL", 0) for u in usage.values())
                if report.stack_bytes is None:
                    report.stack_bytes = max(u.get("STACK", 0) for u in usage.values())
        classified = classify(report, expect_mma, arch, mma_hint)
        report.findings = [text for _, text in classified]
        report.codes = [code for code, _ in classified]
        report.arch = arch
        reports.append(report)
    notes_out: list[str] = list(notes or [])
    if not sass_found and files:
        notes_out.append("no SASS: cuobjdump/nvdisasm not found or the binary was not a cubin")
    tools: dict[str, str | None] = {
        t: next(iter(find_tools(t)), None) for t in ("cuobjdump", "nvdisasm", "ptxas")
    }
    findings = [f for r in reports for f in r.findings]
    codes = [{"code": c, "arch": r.arch, "kernel": r.kernel} for r in reports for c in r.codes]
    summary: dict[str, Any] = {
        "directory": str(directory),
        "backend": backend,
        "kernels": len({r.kernel for r in reports}),
        "versions": len(reports),
        "sass": sass_found,
        "tools": tools,
        "reports": [asdict(r) for r in reports],
        "findings": findings,
        "codes": codes,
        "notes": notes_out,
    }
    (directory / "report.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    lines = [r.line() for r in reports] + [f"- {f}" for f in findings]
    lines += [f"note: {n}" for n in notes_out]
    (directory / "report.txt").write_text("\n".join(lines) + "\n")
    return summary
