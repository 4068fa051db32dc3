"""`ctxkernel env`: the environment variables, printed from their one registry
(``harness/envvars.py``) with the value each has here."""

from __future__ import annotations

from typing import Any

import click

from harness import envvars

from ..errors import UserError, shown
from ..render import json_line
from .common import json_option

COLUMNS = ("VARIABLE", "TYPE", "DEFAULT", "VALUE", "READ BY", "MEANING")


@click.command("env")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@json_option
def env_cmd(names: tuple[str, ...], as_json: bool) -> int:
    """List the CTXKERNEL_* environment variables: type, default, value here, reader, meaning.

    Every variable that ctxkernel, the harness, the tests or CI read is declared once, in
    harness/envvars.py; this prints each declaration with the variable's value in this
    environment ("-" when unset). NAME... lists only those variables; a name that is not
    declared is an error (exit 2).

    With --json: one JSON object per line, {"type": "env", "name", "value_type",
    "default", "value", "meaning", "reader"} (and "choices" for a choice); "value" is the
    text as set, null when unset.
    """
    chosen = [_declared(name) for name in names] if names else list(envvars.VARS.values())
    if as_json:
        for var in chosen:
            json_line(_doc(var))
        return 0
    rows = [
        (
            var.name,
            var.kind,
            envvars.shown_default(var),
            _shown_value(var.raw()),
            var.reader,
            var.meaning,
        )
        for var in chosen
    ]
    widths = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS) - 1)]
    for row in [COLUMNS, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[-1]]))
    return 0


def _declared(name: str) -> envvars.Var[Any]:
    try:
        return envvars.declared(name)
    except KeyError:
        raise UserError(
            f"{shown(name)} is not a ctxkernel environment variable (`ctxkernel env` lists them)"
        ) from None


def _doc(var: envvars.Var[Any]) -> dict[str, Any]:
    raw = var.raw()
    doc: dict[str, Any] = {
        "type": "env",
        "name": var.name,
        "value_type": var.kind,
        "default": var.default,  # None, a bool, a number or text: JSON as it is
        "value": None if raw is None else _printable(raw),
        "meaning": var.meaning,
        "reader": var.reader,
    }
    if var.choices:
        doc["choices"] = list(var.choices)
    return doc


def _shown_value(raw: str | None) -> str:
    if raw is None:
        return "-"
    return _printable(raw) if raw.strip() else repr(raw)  # an empty value is set: say so


def _printable(raw: str) -> str:
    """The value as text that can be written: a lone surrogate (bytes that were not UTF-8)
    becomes its escape, ``\\udcff``."""
    return raw.encode("utf-8", "backslashreplace").decode("utf-8")
