"""``python -m harness.worker``: the worker's serve loop (``serve.py``)."""

import sys

from .serve import main

if __name__ == "__main__":
    sys.exit(main())
