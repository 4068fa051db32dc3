"""Option sets declared once: a dataclass field's metadata says how a command line sets it,
and the click options are generated from it.

    @dataclass
    class RunOptions:
        timeout_s: float = field(
            default=30.0, metadata=option("--timeout", help="Seconds per request.", low=0.1)
        )

``option(...)`` records the flag names, the help, a choice list (or a function returning
one, read when the options are built: the backend registry's names) or a numeric range,
whether it is an on/off flag and the value it then sets (``--graph`` sets
``bench_mode="graph"``, ``--no-record`` sets ``record=False``), and a path's kind.
``click_options(cls)`` adds one click option per declared field, its default the field's
default (so the command line and the library cannot disagree); ``values_from_cli(cls,
kwargs)`` reads a click callback's arguments back into field values. Click is imported
only when options are built.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
KEY = "option"


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    help: str
    choices: tuple[str, ...] | Callable[[], Sequence[str]] | None = None
    low: float | None = None
    high: float | None = None
    is_flag: bool = False
    flag_value: Any = True  # what the field becomes when the on/off flag is given
    dir_only: bool = False  # a path that must not be a file
    metavar: str | None = None
    multiple: bool = False  # repeatable; the field gets the tuple of values
    name: str | None = None  # the click parameter's name (default: from the longest flag)

    @property
    def dest(self) -> str:
        """The click parameter's name: ``name``, else the longest flag, dashes to underscores."""
        return self.name or max(self.flags, key=len).lstrip("-").replace("-", "_")

    def choice_list(self) -> list[str] | None:
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)


def option(*flags: str, help: str, **kwargs: Any) -> dict[str, Option]:
    """Field metadata: how the field is set from a command line."""
    return {KEY: Option(tuple(flags), help, **kwargs)}


def declared(cls: type) -> list[tuple[dataclasses.Field[Any], Option, Any]]:
    """(field, its option, its type) for every field of ``cls`` that declares one."""
    hints = typing.get_type_hints(cls)
    out = []
    for item in dataclasses.fields(cls):
        spec = item.metadata.get(KEY)
        if isinstance(spec, Option):
            out.append((item, spec, hints[item.name]))
    return out


def default_of(item: dataclasses.Field[Any]) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return None


def _base(kind: Any) -> Any:
    """``int | None`` -> ``int``."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) == 1:
            return _base(args[0])
    return typing.get_origin(kind) or kind


def _click_type(spec: Option, base: Any) -> Any:
    import click

    choices = spec.choice_list()
    if choices is not None:
        return click.Choice(choices)
    if base in (tuple, list):
        return str
    if base is Path:
        return click.Path(path_type=Path, file_okay=not spec.dir_only)
    ranged = spec.low is not None or spec.high is not None
    if base is int:
        return click.IntRange(spec.low, spec.high) if ranged else int  # type: ignore[arg-type]
    if base is float:
        return click.FloatRange(spec.low, spec.high) if ranged else float
    return str


def click_options(cls: type, only: Sequence[str] | None = None) -> Callable[[F], F]:
    """A decorator adding a click option for each declared field of ``cls`` (``only``:
    just these fields), in declaration order."""
    import click

    def decorate(fn: F) -> F:
        for item, spec, kind in reversed(declared(cls)):
            if only is not None and item.name not in only:
                continue
            if spec.is_flag:
                fn = click.option(*spec.flags, spec.dest, is_flag=True, help=spec.help)(fn)
                continue
            default = default_of(item)
            fn = click.option(
                *spec.flags,
                spec.dest,
                type=_click_type(spec, _base(kind)),
                default=default,
                show_default=default not in (None, ()),
                multiple=spec.multiple,
                metavar=spec.metavar,
                help=spec.help,
            )(fn)
        return fn

    return decorate


def values_from_cli(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """Field values from a click callback's keyword arguments, for the declared fields
    present (an on/off flag not given leaves the field's default)."""
    out: dict[str, Any] = {}
    for item, spec, _ in declared(cls):
        if spec.dest in values:
            value = values[spec.dest]
            out[item.name] = (
                (spec.flag_value if value else default_of(item)) if spec.is_flag else value
            )
    return out


def cli_names(cls: type) -> set[str]:
    """The click parameter names ``click_options(cls)`` adds."""
    return {spec.dest for _, spec, _ in declared(cls)}
