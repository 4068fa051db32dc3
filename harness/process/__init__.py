"""How the parent starts, isolates, talks to and cleans up a worker.

``sandbox.py`` (also run by path as the launcher, importing nothing of the harness),
``namespaces.py`` (the kernel's primitives it builds them from, and the probe),
``walls.py``, ``seccomp.py`` and ``lifetime.py`` (loaded by path from the same folder)
build the worker's namespaces, walls, seccomp filter and its tree's lifetime;
``freeze.py`` stops a worker's whole tree while the reference is timed; ``sandboxrun.py`` is ``ctxkernel sandbox run``; ``templates.py`` the warm worker
templates; ``workerenv.py`` the worker's environment; ``channel.py`` the private result
channel; ``session.py`` ``WorkerSession``, what the rungs talk to; ``local.py``
``LocalSession``, a worker as a child process of this one;
``cleanup.py`` the temp dirs and processes removed whatever ends a check.
"""
