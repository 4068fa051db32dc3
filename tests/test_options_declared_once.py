"""Every knob declared once: one library (``harness/optionspec.py``) turns dataclass fields
into click parameters and agent-tool schemas, and the commands take their options from
declared dataclasses. The retrieval stack once had a second such library
(``ctxkernel/paramspec.py``), and ``ctxkernel agent`` hand-wrote its click options beside
``AgentConfig``: ``--device`` was parsed there and then never reached the run."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import click
import pytest

from ctxkernel.agent.state import AgentConfig
from ctxkernel.cli import main as cli_main
from ctxkernel.cli.agent import AgentCommand, agent_cmd
from ctxkernel.cli.check import check_cmd
from ctxkernel.cli.context import init_cmd
from harness.cli import CheckCommand
from harness.options import RunOptions
from harness.optionspec import cli_names, declared

REPO = Path(__file__).resolve().parents[1]
LIBRARY = REPO / "harness" / "optionspec.py"
PACKAGES = ("ctxkernel", "harness", "bench", "examples", "tests")


def _modules() -> list[tuple[Path, ast.Module]]:
    out = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            try:
                out.append((path, ast.parse(path.read_text(), str(path))))
            except SyntaxError:  # the planted bad candidates: not code anything imports
                continue
    return out


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def test_one_declare_once_library() -> None:
    """Only ``harness/optionspec.py`` reads dataclass fields' metadata (what a declare-once
    library does), and every field that carries metadata carries the library's ``option``."""
    assert not (REPO / "ctxkernel" / "paramspec.py").exists()
    readers, foreign = [], []
    for path, tree in _modules():
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
        walks_fields = any(_called(c) == "fields" for c in calls)
        reads_metadata = any(
            isinstance(n, ast.Attribute) and n.attr == "metadata" for n in ast.walk(tree)
        )
        if walks_fields and reads_metadata:
            readers.append(path)
        for call in calls:
            if _called(call) != "field":
                continue
            for kw in call.keywords:
                if kw.arg == "metadata" and not (
                    isinstance(kw.value, ast.Call) and _called(kw.value) == "option"
                ):
                    foreign.append(f"{path.relative_to(REPO)}:{call.lineno}")
    assert readers == [LIBRARY]
    assert foreign == []


def _params(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if p.name is not None}


def _default(command: click.Command, param: click.Parameter) -> Any:
    value = param.get_default(click.Context(command))
    return tuple(value or ()) if getattr(param, "multiple", False) else value


@pytest.mark.parametrize(
    ("command", "classes", "hand_written"),
    [
        (agent_cmd, (AgentConfig, AgentCommand), {"problem", "index_dir", "chroma_url", "as_json"}),
        (check_cmd, (CheckCommand, RunOptions), {"problem", "candidates"}),
    ],
    ids=["agent", "check"],
)
def test_every_option_comes_from_a_declaration(
    command: click.Command, classes: tuple[type, ...], hand_written: set[str]
) -> None:
    """Besides the arguments and the options shared by every command (the index, --json),
    a command has exactly the declared options, each with its field's default."""
    params = _params(command)
    declared_names = set().union(*(cli_names(cls) for cls in classes))
    assert set(params) - hand_written == declared_names
    for cls in classes:
        for item in declared(cls):
            if not item.is_flag:
                default = tuple(item.default) if item.spec.many else item.default
                assert _default(command, params[item.dest]) == default, item.name


def test_context_init_takes_the_agents_declaration() -> None:
    params = _params(init_cmd)
    for item in declared(AgentConfig):
        if item.name in ("backend", "target", "device"):
            param = params[item.dest]
            assert (param.help, _default(init_cmd, param)) == (item.spec.help, item.default)


def _shown_default(capsys: pytest.CaptureFixture[str], command: str, flag: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli_main([command, "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    match = re.search(rf"{flag} FLOAT RANGE [^\[]*\[default: ([^;\]]+)", text)
    assert match, text
    return match.group(1)


def test_agent_check_timeout_shows_the_same_default_as_check_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One home for the check's timeout: ``RunOptions.timeout_s``."""
    agent = _shown_default(capsys, "agent", "--check-timeout")
    check = _shown_default(capsys, "check", "--timeout")
    assert agent == check == str(RunOptions.timeout_s)
    assert AgentConfig(problem="p").check_timeout_s == RunOptions().timeout_s


class _Started(Exception):
    """Raised by the stand-in Agent: the command line has been read."""


def test_agent_device_reaches_the_run_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The regression: ``--device cpu`` was parsed, then left out of ``AgentConfig``."""
    from ctxkernel.agent.loop import Agent

    seen: dict[str, Any] = {}

    def start(config: AgentConfig, *args: Any, **kwargs: Any) -> None:
        seen["config"] = config
        raise _Started

    class Client:
        def check_credentials(self) -> None:
            pass

    monkeypatch.setattr(Agent, "start", staticmethod(start))
    monkeypatch.setattr("ctxkernel.cli.agent._client", lambda config, command: Client())
    argv = ["p", "--device", "cpu", "--max-wall", "2m", "--price", "3,15", "--seeds", "2"]
    with pytest.raises(_Started):
        agent_cmd.main(argv, standalone_mode=False)
    config = seen["config"]
    assert config == AgentConfig(
        problem="p", device="cpu", max_wall_s=120.0, price=[3.0, 15.0], trials=2
    )


def test_agent_resume_changes_only_what_the_command_line_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Options not given keep the resumed run's values; backend and device stay."""
    from ctxkernel.agent.loop import Agent

    seen: dict[str, Any] = {}

    def resume(ref: str, overrides: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        seen.update(ref=ref, overrides=overrides)
        raise _Started

    monkeypatch.setattr(Agent, "resume", staticmethod(resume))
    argv = ["--resume", "last", "--check-timeout", "5", "--lookups", "3", "--device", "cuda"]
    with pytest.raises(_Started):
        agent_cmd.main(argv, standalone_mode=False)
    assert seen == {
        "ref": "last",
        "overrides": {"check_timeout_s": 5.0, "lookups_per_version": 3},
    }
