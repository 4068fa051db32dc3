"""Options declared once: a dataclass field's metadata says how a command line and an agent
tool set it, and the click parameters, the values read back from click, the tool's JSON
schema and the values read from a tool call are all generated from it. The one
declare-once library of both packages (``ctxkernel`` imports it; it imports neither).

    @dataclass(frozen=True, kw_only=True)
    class SearchQuery:
        query: str = field(metadata=option(help="What to look for.", argument=True, max_length=2000))
        k: int = field(default=10, metadata=option("-k", help="How many hits.", low=1, high=50))

``option(...)`` records the flags (or ``argument=True`` for a positional one), the help
(``tool_help`` when a model needs other words than a person), a choice list (or a function
returning one, read when the parameters are built: the backend registry's names), a
numeric range (``above`` for an exclusive lower bound), string length limits and a regular
expression (``pattern``), ``many`` (the command line repeats it and the field gets the
tuple; a tool takes a string or a list of strings), an environment variable the command
line also reads, ``parse`` (what turns the command line's text into the field's value:
``30m`` into seconds), a path's kind, and whether the command line (``cli``) and the tool
(``tool``) offer it at all. A field without a default is required on both. A ``bool``
field is an on/off flag that flips its default (``--no-record`` sets ``record=False``);
another field becomes one with ``flag_value`` (``--graph`` sets ``bench_mode="graph"``).
The click parameter is named after the field (``dest`` overrides it).

``click_options(cls, only=None)`` decorates a click command with one parameter per field
the command line offers, its default the field's default; ``values_from_cli(cls, values)``
reads a click callback's keyword arguments back into field values and ``from_cli(cls,
values, **more)`` builds the dataclass from them. ``tool_schema(cls)`` is the JSON schema
of a tool's input (defaults included, ``additionalProperties: false``) and ``from_tool(cls,
args)`` builds the dataclass from validated tool arguments. So the library, the command
line and the tool cannot disagree on a default or a limit. Click is imported only when
parameters are built.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
KEY = "option"


@dataclass(frozen=True)
class Option:
    help: str
    flags: tuple[str, ...] = ()
    argument: bool = False  # a positional command-line argument
    cli: bool = True  # offered on the command line
    tool: bool = True  # offered to the model (``tool_schema``)
    tool_help: str | None = None  # the tool's description when it differs from ``help``
    choices: tuple[str, ...] | Callable[[], Sequence[str]] | None = None
    low: float | None = None  # inclusive bounds of a number
    high: float | None = None
    above: float | None = None  # exclusive lower bound of a number
    min_length: int | None = None  # of a string (of each one, for ``many``)
    max_length: int | None = None
    pattern: str | None = None  # a regex a string must match (JSON Schema's: re.search)
    like: str | None = None  # what a string matching ``pattern`` looks like, for errors
    many: bool = False  # repeatable flag / a string or a list of strings
    flag_value: Any = None  # a non-bool field set to this by an on/off flag
    parse: Callable[[str], Any] | None = None  # the command line's text -> the field's value
    envvar: str | None = None  # the command line also reads this variable
    dir_only: bool = False  # a path that must not be a file
    metavar: str | None = None
    dest: str | None = None  # the click parameter's name (default: the field's)

    def choice_list(self) -> list[str] | None:
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)


def option(*flags: str, help: str, **kwargs: Any) -> dict[str, Option]:
    """Field metadata: how the field is set from a command line and from a tool call."""
    return {KEY: Option(help, tuple(flags), **kwargs)}


@dataclass(frozen=True)
class Declared:
    """One declared field: its dataclass field, its Option and its type without ``None``."""

    field: dataclasses.Field[Any]
    spec: Option
    kind: Any

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def dest(self) -> str:
        return self.spec.dest or self.field.name

    @property
    def required(self) -> bool:
        return (
            self.field.default is dataclasses.MISSING
            and self.field.default_factory is dataclasses.MISSING
        )

    @property
    def default(self) -> Any:
        if self.field.default is not dataclasses.MISSING:
            return self.field.default
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return None

    @property
    def is_flag(self) -> bool:
        """An on/off flag: a ``bool`` field, or one with a ``flag_value``."""
        return not self.spec.many and (self.kind is bool or self.spec.flag_value is not None)

    @property
    def flag_value(self) -> Any:
        """What the field becomes when its flag is given."""
        return self.spec.flag_value if self.spec.flag_value is not None else not self.default


def declared(cls: type) -> tuple[Declared, ...]:
    """Every field of ``cls`` that declares an Option, in declaration order (read once per
    class: ``get_type_hints`` costs ~1 ms, and every tool call asks)."""
    return _declared(cast(Any, cls))


@functools.cache
def _declared(cls: Any) -> tuple[Declared, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for item in dataclasses.fields(cls):
        spec = item.metadata.get(KEY)
        if isinstance(spec, Option):
            out.append(Declared(item, spec, _base(hints[item.name])))
    return tuple(out)


def _base(kind: Any) -> Any:
    """``int | None`` -> ``int``; ``tuple[str, ...]`` -> ``tuple``."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) == 1:
            return _base(args[0])
    return typing.get_origin(kind) or kind


# --- the tool's JSON schema -------------------------------------------------------------


def _string_schema(spec: Option) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string"}
    choices = spec.choice_list()
    if choices is not None:
        out["enum"] = choices
    if spec.min_length is not None:
        out["minLength"] = spec.min_length
    if spec.max_length is not None:
        out["maxLength"] = spec.max_length
    if spec.pattern is not None:
        out["pattern"] = spec.pattern
    return out


def property_schema(item: Declared) -> dict[str, Any]:
    """The JSON schema of one field as a tool input property."""
    spec, kind = item.spec, item.kind
    out: dict[str, Any]
    if spec.many:
        one = _string_schema(spec)
        out = {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]}
    elif kind is bool:
        out = {"type": "boolean"}
    elif kind in (int, float):
        out = {"type": "integer" if kind is int else "number"}
        bounds = (("minimum", spec.low), ("exclusiveMinimum", spec.above), ("maximum", spec.high))
        out.update({key: kind(value) for key, value in bounds if value is not None})
    elif kind is str:
        out = _string_schema(spec)
    else:
        raise TypeError(f"{item.name}: no tool schema for a field of type {kind!r}")
    default = item.default
    if not item.required and default is not None and default != ():
        out["default"] = default
    out["description"] = spec.tool_help or spec.help
    return out


def tool_schema(cls: type) -> dict[str, Any]:
    """The JSON schema of a tool's input: the fields the tool offers, in declaration order."""
    fields = [item for item in declared(cls) if item.spec.tool]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {item.name: property_schema(item) for item in fields},
    }
    required = [item.name for item in fields if item.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def from_tool(cls: type[T], args: Mapping[str, Any]) -> T:
    """``cls`` from a tool's validated arguments (a single string for a ``many`` field
    becomes a one-element tuple; what is absent keeps its default)."""
    values: dict[str, Any] = {}
    for item in declared(cls):
        if not item.spec.tool or args.get(item.name) is None:
            continue
        value = args[item.name]
        if item.spec.many:
            value = (value,) if isinstance(value, str) else tuple(value)
        values[item.name] = value
    return cls(**values)


# --- the click parameters ---------------------------------------------------------------


def _text_type(spec: Option) -> Any:
    import click

    class Text(click.ParamType):
        name = "text"

        def convert(self, value: Any, p: click.Parameter | None, ctx: click.Context | None) -> Any:
            text = str(value)
            if spec.min_length is not None and len(text) < spec.min_length:
                least = "empty" if spec.min_length == 1 else f"under {spec.min_length} characters"
                self.fail(f"{text!r} is {least}", p, ctx)
            if spec.max_length is not None and len(text) > spec.max_length:
                self.fail(f"longer than {spec.max_length} characters ({len(text)})", p, ctx)
            if spec.pattern is not None and not re.search(spec.pattern, text):
                self.fail(f"{text!r}: expected {spec.like or spec.pattern}", p, ctx)
            return text

    return Text()


def _click_type(item: Declared) -> Any:
    import click

    spec, kind = item.spec, item.kind
    choices = spec.choice_list()
    if choices is not None:
        return click.Choice(choices)
    if spec.parse is None and kind in (int, float):
        low = spec.above if spec.above is not None else spec.low
        if low is None and spec.high is None:
            return kind
        ranged = click.IntRange if kind is int else click.FloatRange
        return ranged(low, spec.high, min_open=spec.above is not None)  # type: ignore[arg-type]
    if spec.parse is None and kind is Path:
        return click.Path(path_type=Path, file_okay=not spec.dir_only)
    if spec.min_length is not None or spec.max_length is not None or spec.pattern is not None:
        return _text_type(spec)
    return str


def click_options(cls: type, only: Sequence[str] | None = None) -> Callable[[F], F]:
    """A decorator adding one click argument or option for each field of ``cls`` the
    command line offers (``only``: just these fields), in declaration order."""
    import click

    def decorate(fn: F) -> F:
        for item in reversed(declared(cls)):
            spec = item.spec
            if not spec.cli or (only is not None and item.name not in only):
                continue
            if spec.argument:
                fn = click.argument(item.dest, type=_click_type(item))(fn)
                continue
            if item.is_flag:  # given or not; values_from_cli says what that means
                fn = click.option(*spec.flags, item.dest, is_flag=True, help=spec.help)(fn)
                continue
            default = None if item.required else item.default
            fn = click.option(
                *spec.flags,
                item.dest,
                type=_click_type(item),
                default=default,
                required=item.required,
                multiple=spec.many,
                show_default=default not in (None, ()),
                envvar=spec.envvar,
                metavar=spec.metavar,
                help=spec.help,
            )(fn)
        return fn

    return decorate


def values_from_cli(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """Field values from a click callback's keyword arguments, for the declared fields the
    command line offers and ``values`` holds: a flag given sets its flag value, one not
    given leaves the field's default; ``parse`` turns text into the field's value."""
    out: dict[str, Any] = {}
    for item in declared(cls):
        if not item.spec.cli or item.dest not in values:
            continue
        value = values[item.dest]
        if item.is_flag:
            value = item.flag_value if value else item.default
        elif item.spec.many:
            value = tuple(value)
        elif item.spec.parse is not None and value is not None:
            value = item.spec.parse(value)
        out[item.name] = value
    return out


def from_cli(cls: type[T], values: Mapping[str, Any], **more: Any) -> T:
    """``cls`` from a click callback's keyword arguments and ``more`` (fields the command
    line does not offer keep their defaults)."""
    return cls(**values_from_cli(cls, values), **more)


def cli_names(cls: type) -> set[str]:
    """The click parameter names ``click_options(cls)`` adds."""
    return {item.dest for item in declared(cls) if item.spec.cli}
