"""The worker: everything that runs beside the candidate, inside the sandbox.

``serve.py`` is the serve loop (``python -m harness.worker``) and its one op table;
``benchworker.py`` the benchmark's GPU requests; ``guards.py`` the runtime guards;
``freshness.py`` output freshness; ``timing.py``, ``witness.py`` and ``kernelrecords.py``
the timers; ``jitclock.py`` and ``compiled.py`` compile time and ``torch.compile``;
``artifacts.py`` the backend's artefacts collected here; ``zygote.py`` a warm template's
child side (``python -m harness.worker.zygote``).

Nothing here imports the ladder (``rungs/``), ``runner``, ``runners/``, ``cli`` or
``server/`` (``tests/harness/test_harness_imports.py``). This package imports nothing
itself, so importing one of its modules stays cheap.
"""
