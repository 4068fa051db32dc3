"""The far side of a remote check: ``python -m harness.runners.remote JOBDIR``.

Run on an SSH host or a Ray node inside an unpacked job bundle (``bundle.py``): checks the
candidate with ``LocalRunner`` and leaves ``JOBDIR/result/``. Exit status 0 when a verdict
was written (passed or failed), 2 on a usage error, 3 on a harness error; ``error.json``
says which. ``--watch-parent`` ends the check (and the workers it spawned) if the process
that started it dies, so a lost Ray worker leaves nothing running on the node.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path


def _watch_parent(jobdir: Path) -> None:
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                from ..process.cleanup import kill_processes_under

                kill_processes_under(jobdir)
                os._exit(137)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.runners.remote")
    parser.add_argument("jobdir", type=Path)
    parser.add_argument("--watch-parent", action="store_true")
    args = parser.parse_args(argv)
    jobdir = args.jobdir.resolve()
    # the check's temp dirs (and so its workers' working directories) live in the job
    tmp = jobdir / "tmp"
    tmp.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None
    if args.watch_parent:
        _watch_parent(jobdir)
    from .bundle import execute_job

    return execute_job(jobdir)


if __name__ == "__main__":
    sys.exit(main())
