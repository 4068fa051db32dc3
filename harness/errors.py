"""Harness errors: what the user can fix (``UsageError``) versus a broken harness.

A usage error (missing file, unknown problem format, a problem whose ``generate_input``
crashes) is reported as one line and exit status 2. A candidate's failure is never an
exception: it is a failed rung in the verdict.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class of the harness's own errors."""


class UsageError(HarnessError):
    """A mistake the user can fix: bad path, unknown format, invalid option, broken problem."""


class ProblemError(UsageError):
    """The problem definition itself is broken (missing ``ref_kernel``, crashing ``generate_input``...)."""
