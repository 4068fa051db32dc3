"""UserError: a mistake the user can fix (bad input, unknown corpus, unreachable source).

The CLI prints it as one line on stderr and exits 2, never with a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """A user-fixable error; the message is shown as is."""
