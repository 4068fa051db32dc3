"""The rung ladder: small named checks run in order, stopping at the first failed gate.

A rung is ``name``, ``gating`` and ``run(ctx) -> RungResult(ok, metrics, reason)``;
``ladder.Ladder`` runs them. Families: ``precheck`` (static), ``compile`` (import and
first launch), ``run`` (the output is a plain dense tensor of the right kind), ``correctness``
(every shape x trials against the reference, in the parent), ``anticheat`` (burst calls and
everything the guards saw), and on request ``benchmark`` (timing in a fresh worker,
the reference timed too), ``roofline`` (percent of the measured ceilings; the physics
floor), ``dumps`` (IR/PTX/CUBIN/SASS and what to look at) and ``profile`` (ncu).
"""
