"""The rung ladder: small named checks run in order, stopping at the first failed gate.

A rung is ``name``, ``gating`` and ``run(ctx, earlier) -> RungResult`` (built with
``RungResult.passed``/``fail``/``skip``); ``ladder.Ladder`` runs them. Families:
``precheck`` (static), ``compile`` (import and first launch), ``run`` (the output is a
plain dense tensor of the right kind), ``correctness`` (every shape x trials against the
reference, in the parent), ``anticheat`` (burst calls and everything the guards saw), and
on request ``benchmark`` (timing in a fresh worker, the reference timed too), ``roofline``
(percent of the measured ceilings; the physics floor), ``dump`` (IR/PTX/CUBIN/SASS and
what to look at), ``profile`` (ncu), ``isa`` (the instruction family the hot kernel must
execute), ``sanitize`` (compute-sanitizer's four tools) and ``trace`` (time per marked
kernel section).

What they share: ``context.LadderContext`` (the check's facts and its three parts:
``inputs``, ``workers``, ``checks``), the typed results one rung hands the next
(``results.py``) and the helpers several rungs use (``common.py``). No rung imports
another rung's module.
"""
