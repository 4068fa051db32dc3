"""Folders: which a worker must see, and which the parent keeps from every worker.

``worker_paths``: what a worker reads (its check's folder, the problem, the harness, the
interpreter and its packages), bound back under a namespace mode's private temp folders
and granted by name where landlock narrows a folder too wide to grant whole.
``parent_folders``: the run records, caches, check-server sockets, configuration and
every other check's temp folder, covered by an empty tmpfs in a namespace mode and kept
unread by landlock where no tmpfs could cover them (``sandbox.enter_worker``). The
parent's side only: the launcher never imports this file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from . import walls

# the shared temp folders themselves: a module path that is one of them (``python -m``
# started in /tmp puts /tmp on sys.path) is never kept whole -- the worker's private temp
# folder would then be the real one, writable by the worker, and every file there visible
_TEMP_ROOTS = ("/tmp", "/var/tmp", "/dev/shm")


def worker_paths(*extra: object) -> list[str]:
    """What a worker must see under a private temp folder: ``extra`` (its check's temp
    root, the problem), the harness, the interpreter, and this process's module paths
    (but a shared temp folder itself: ``_TEMP_ROOTS``)."""
    paths = [str(p) for p in extra if p]
    paths.append(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    paths += [sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))]
    found = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    found += [p for p in sys.path if p and os.path.isabs(p)]
    roots = {os.path.realpath(r) for r in _TEMP_ROOTS}
    paths += [p for p in found if os.path.realpath(p) not in roots]
    return list(dict.fromkeys(os.path.realpath(p) for p in paths if os.path.exists(p)))


def parent_folders(own: Sequence[str | os.PathLike[str]] = (), make: bool = True) -> list[str]:
    """The folders this process keeps for itself, out of every worker's view: run records
    (with the agent's state), caches (check-server sockets, reference times, ceilings),
    the user's configuration; and the temp folders of every other check, template, pool
    or server (``ctxkernel-*``: other candidates, their logs and problems, what the run
    records will hold), all but those holding one of the paths in ``own`` (the worker's
    folder, its problem). A namespace mode's private temp folder hides those already.
    ``make``: those missing are made (else left out)."""
    import contextlib

    from ..paths import cache_dir, check_server_dir, config_dir, default_runs_dir

    found = []
    server = check_server_dir()
    for path in (default_runs_dir(), cache_dir(), config_dir(), server):
        # one that does not exist yet could be neither covered nor kept unread, and would
        # then be open to the workers running when it is made (a batch's first records):
        # it is made now, empty (the servers' own 0700, as they make it)
        if make:
            with contextlib.suppress(OSError):
                os.makedirs(path, 0o700 if path == server else 0o777, exist_ok=True)
        if make or os.path.isdir(path):
            found.append(os.path.realpath(path))
    found += _other_temp_roots([os.path.realpath(p) for p in own])
    return list(dict.fromkeys(found))


TEMP_PREFIX = "ctxkernel-"  # every temp folder the harness makes (cleanup.PREFIXES and more)


def _other_temp_roots(own: list[str]) -> list[str]:
    """The ``ctxkernel-*`` folders in the temp folder, and beside each ``ctxkernel-*``
    folder that holds one of ``own`` (a pool's checks run inside the pool's folder), that
    hold none of ``own``."""
    import tempfile

    places = {os.path.realpath(tempfile.gettempdir())}
    for path in own:
        while path not in ("/", ""):
            parent = os.path.dirname(path)
            if os.path.basename(path).startswith(TEMP_PREFIX):
                places.add(parent)
            path = parent
    found = []
    for place in sorted(places):
        try:
            entries = [e for e in os.scandir(place) if e.name.startswith(TEMP_PREFIX)]
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and not walls.holds(entry.path, own):
                found.append(os.path.realpath(entry.path))
    return found
