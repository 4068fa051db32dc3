"""The check's options are declared once (``RunOptions`` and ``CheckCommand`` field metadata):
the command lines are generated from them, agree with the library's defaults, and read
back into the same dataclasses; ``execute_check`` takes the two objects."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from harness.cli import CheckCommand, check_options, execute_check
from harness.options import RunOptions
from harness.optionspec import cli_names, declared, from_cli, values_from_cli

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _harness_check() -> click.Command:
    @click.command()
    @check_options
    def check(**_: Any) -> None: ...

    return check


def _parse(command: click.Command, args: list[str]) -> dict[str, Any]:
    return dict(command.make_context("check", list(args)).params)


def test_every_command_line_default_is_the_dataclass_default() -> None:
    from ctxkernel.cli.check import check_cmd
    from ctxkernel.cli.mcp import mcp_cmd

    for command in (_harness_check(), check_cmd):
        params = {p.name: p for p in command.params}
        for cls in (RunOptions, CheckCommand):
            for item in declared(cls):
                param = params[item.dest]
                if item.is_flag:  # not given: the field keeps its default (next test)
                    assert param.is_flag, item.name  # type: ignore[attr-defined]
                else:
                    assert param.default == item.default, (item.name, param.default)
    mcp = {p.name: p for p in mcp_cmd.params}
    for item in declared(RunOptions):
        if item.name in ("device", "backend"):  # check_kernel's options, the same declaration
            assert mcp[item.dest].help == item.spec.help
            assert mcp[item.dest].default == item.default


def test_flags_read_back_into_run_options() -> None:
    command = _harness_check()
    plain = _parse(command, ["p", "c.py"])
    assert from_cli(RunOptions, plain) == RunOptions()
    args = ["p", "c.py", "--seeds", "5", "--timeout", "2.5", "--no-record", "--graph",
            "--l2", "hot", "--bench", "--dump", "out", "--backend", "tilelang"]  # fmt: skip
    values = _parse(command, args)
    options = from_cli(RunOptions, values)
    assert options == dataclasses.replace(
        RunOptions(), trials=5, timeout_s=2.5, record=False, bench_mode="graph",
        bench_l2="hot", bench=True, dump_dir=Path("out"), backend="tilelang",
    )  # fmt: skip
    assert values_from_cli(CheckCommand, values) == {
        "as_json": False, "feedback": False, "progress": False, "shapes": (), "runner": None,
        "jobs": None, "resume": None, "server": True,
    }  # fmt: skip
    # the click parameters are named after the fields, whatever their flags say
    assert cli_names(RunOptions) >= {"trials", "timeout_s", "record", "bench_mode", "dump_dir"}


def test_execute_check_takes_the_command_and_the_run_options() -> None:
    printed: list[str] = []
    command = CheckCommand(
        EXAMPLES / "vector_add", [EXAMPLES / "vector_add" / "solution_triton.py"], as_json=True,
        shapes=("n=100",),
    )  # fmt: skip
    options = RunOptions(device="cpu", trials=1, burst=2, record=False)
    assert execute_check(command, options, echo=printed.append) == 0
    doc = json.loads(printed[0])
    assert doc["ok"] and doc["seeds"]["shapes"] == ["n=100"] and doc["options"]["trials"] == 1
