"""The ``pre-checks`` rung: the reference's ops, parse, entry point, and a static policy scan.

First the reference runs once on a throwaway input (``LadderContext.learn_reference``):
the compute ops it runs are forbidden to the candidate at run time (``harness/problems/library.py``)
and a GPU MODE problem's output tensors are found.

The scan is a filter, not the guarantee (the worker's runtime guards and the parent's
checks are): it names what it sees early, with a rule id, a line and a severity.

Rules (``error`` gates the ladder; with ``policy_scan=False`` every policy rule is
downgraded to ``warning`` so the runtime defences can be tested on their own):

=====  ==================  ======================================================
P001   syntax              the file does not parse
P002   missing-entry       no ``custom_kernel`` / ``ModelNew``
P101   forbidden-op        a library op the problem forbids (``torch.matmul``, ``@``,
                           ``F.softmax``, ``x.softmax()``, ``getattr(torch, "mm")``)
P102   library-fallback    ``try: kernel() except: torch_op()``
P103   calls-reference     imports ``reference``, calls ``ref_kernel``, subclasses or
                           instantiates the reference ``Model``, ``super().forward``
P201   dynamic-code        ``exec``/``eval``/``compile``/``__import__``/``import_module``
P202   encoded-payload     base64/zlib/marshal/pickle decoding
P203   pip-install         runtime package installation
P301   forbidden-import    subprocess, threading, multiprocessing, socket, ctypes, signal...
P302   process-call        ``os.system``, ``os.fork``, ``os.exec*``, ``os.kill``...
P401   monkeypatch         assigning attributes of imported modules/classes, ``setattr``
                           on them, ``sys.modules`` edits, builtins edits
P402   frame-walk          ``sys._getframe``, ``inspect.currentframe``, ``f_back``,
                           ``__globals__``, ``__closure__``, ``gc`` heap walks
P403   harness-evasion     disabling torch dispatch/function modes, audit hooks, tracing,
                           importing the harness
P404   channel-tamper      ``os.write``/``os.dup2``/``os.fdopen``, ``/proc/self``
P405   memory-read         a path naming a memory file (``/proc/<pid>/mem``, ``"m" + "em"``,
                           ``/dev/mem``): the inputs' bytes read past torch
P501   replay-cache        ``id(x)``, ``x.data_ptr()``, ``x._version`` used as a cache key
P502   cache-decorator     ``lru_cache``/``cache`` on the entry point (warning elsewhere)
P503   global-state        ``global`` writes, function attributes, mutable defaults (warning)
P601   file-read           ``open``/``Path.read_*`` (warning); ``torch.load``/``np.load`` (error)
P602   env-read            ``os.environ``/``os.getenv`` (warning)
P603   early-exit          ``sys.exit``, ``os._exit``, ``exit()``, ``raise SystemExit``
P604   fake-output         printing success-looking text (warning: stdout is ignored anyway)
=====  ==================  ======================================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..staticscan import scan
from ..staticscan.findings import Finding, ScanResult
from ..verdict import RungResult

if TYPE_CHECKING:
    from .context import LadderContext
    from .results import Earlier

__all__ = ["Finding", "PreCheckRung", "ScanResult", "scan"]


class PreCheckRung:
    """Result for the rungs after it: the ``ScanResult`` (its ``jit_ranges`` are where the
    kernel code is)."""

    name = "pre-checks"
    gating = True

    def run(self, ctx: LadderContext, earlier: Earlier) -> RungResult:
        ctx.learn_reference()
        result = scan(
            ctx.candidate.source,
            ctx.policy,
            entry=ctx.candidate.entry,
            entry_kind=ctx.candidate.entry_kind,
            enforce_policy=ctx.options.policy_scan,
        )
        errors = result.errors
        warnings = [f for f in result.findings if f.severity == "warning"]
        metrics = {"errors": len(errors), "warnings": len(warnings)}
        details = {"findings": [f.as_dict() for f in result.findings[:30]]}
        if errors:
            first = errors[0]
            more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
            where = f"line {first.line}: " if first.line else ""
            reason = f"{where}[{first.rule} {first.name}] {first.message}{more}"
            return RungResult.fail(self, reason, metrics, details, output=result)
        reason = f"{len(warnings)} warning(s)" if warnings else ""
        return RungResult.passed(self, metrics, reason, details, output=result)
