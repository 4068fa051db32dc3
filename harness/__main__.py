"""``python -m harness check PROBLEM CANDIDATE``: runs without the ctxkernel package."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
