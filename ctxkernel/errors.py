"""UserError: a mistake the user can fix (bad input, unknown corpus, unreachable source),
and the checks that turn bad text input into one; ``warn_once`` for a mistake that
costs nothing yet (an unknown key in a settings file).

The CLI prints a UserError as one line on stderr and exits 2, never with a traceback.
"""

from __future__ import annotations

import sys

MAX_SHOWN = 80  # characters of a bad value quoted back in an error


class UserError(Exception):
    """A user-fixable error; the message is shown as is."""


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """``repr`` of a value for an error line: ASCII-safe (no lone surrogate reaches a
    terminal or a JSON reply) and at most ``limit`` characters."""
    text = ascii(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def check_text(value: str, what: str) -> str:
    """``value`` unchanged when it is valid Unicode text; UserError otherwise (a lone
    surrogate: undecodable bytes passed through argv, or ``\\ud800`` in a JSON string)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(
            f"{what} {shown(value)} is not valid UTF-8 text (undecodable bytes or a lone surrogate)"
        ) from None
    return value


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """One ``ctxkernel: warning:`` line on stderr, the first time this process meets
    ``message``: settings files are read again by every command of a long-lived server."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    print(f"ctxkernel: warning: {message}", file=sys.stderr)
