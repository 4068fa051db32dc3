"""The worker: everything that runs beside the candidate, inside the sandbox.

``serve.py`` is the serve loop and its one op table; ``lifecycle.py`` the process around
it (``python -m harness.worker``: start, run, exit, the one-shot run under a profiler);
``calltensors.py`` a call's inputs placed and outputs encoded; ``benchworker.py`` the
benchmark's GPU requests; ``guards.py`` the runtime guards (audit hook, op recorder);
``snapshots.py`` what candidate code must leave as it found (identity snapshot, threads,
signal handlers); ``freshness.py`` output freshness; ``timing.py``, ``witness.py`` and
``kernelrecords.py``
the timers; ``jitclock.py`` and ``compiled.py`` compile time and ``torch.compile``;
``artifacts.py`` the backend's artefacts collected here; ``zygote.py`` a warm template's
child side (``python -m harness.worker.zygote``).

Nothing here imports the ladder (``rungs/``), ``runner``, ``runners/``, ``cli`` or
``server/`` (``tests/harness/test_harness_imports.py``). This package imports nothing
itself, so importing one of its modules stays cheap.
"""
