"""``python -m harness.worker``: the worker process (``lifecycle.py``), its serve loop in
``serve.py``."""

import sys

from .lifecycle import main

if __name__ == "__main__":
    sys.exit(main())
