"""The ``ctxkernel`` command line: a thin layer that parses, calls the library, renders.

Commands live one family per module in this package and are imported only when invoked
(``LazyGroup``), so ``ctxkernel grep`` never pays for loading torch or chromadb.

Conventions every command follows:
- stdout is data; progress and logs go to stderr (off with ``--json`` or when not a TTY).
- ``--json`` prints JSON Lines, each object with a ``type`` field.
- exit 0 ok/found, 1 nothing found or verdict failed, 2 error (one line on stderr).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

import click

from ..errors import UserError, check_text, shown

# command name -> "module:attribute" (module relative to this package)
COMMANDS: dict[str, str] = {
    "index": "retrieval:index_cmd",
    "update": "retrieval:update_cmd",
    "corpora": "retrieval:corpora_cmd",
    "search": "retrieval:search_cmd",
    "grep": "retrieval:grep_cmd",
    "show": "retrieval:show_cmd",
    "related": "retrieval:related_cmd",
    "check": "check:check_cmd",
    "check-server": "check:check_server_cmd",
    "eval": "evaluate:eval_cmd",
    "docs": "docs:docs_cmd",
    "tools": "tools:tools_group",
    "mcp": "mcp:mcp_cmd",
    "agent": "agent:agent_cmd",
    "runs": "runs:runs_group",
    "sandbox": "sandbox:sandbox_group",
    "context": "context:context_group",
    "embedder": "embedder:embedder_group",
    "env": "env:env_cmd",
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(f"{__name__}.{module_name}")
        except ImportError as exc:
            return _unavailable(cmd_name, exc)
        command = getattr(module, attr)
        assert isinstance(command, click.Command)
        return command


def _unavailable(name: str, exc: ImportError) -> click.Command:
    """A stand-in that explains why a command cannot run here (a missing dependency)."""

    def fail() -> None:
        raise UserError(f"`{name}` is unavailable: {exc} (install the missing package)")

    return click.Command(name, callback=fail, help=f"(unavailable here: {exc})")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ctxkernel", prog_name="ctxkernel")
def cli() -> None:
    """ctxkernel: context and verification for writing GPU kernels.

    Index CUTLASS/CuTeDSL, Triton and the PTX ISA docs into a local store and search
    them (index, search, grep, show, docs); check a candidate kernel against a
    reference (check); let an agent drive both (agent, mcp).

    \b
    Environment:
      CTXKERNEL_HOME       one folder for everything: indexes/, runs/, cache/, and the
                           config dir too (config.toml, corpora/*.toml); unset: the
                           checkout or ~/.local/share/ctxkernel, ~/.cache/ctxkernel and
                           ~/.config/ctxkernel (XDG_*_HOME move the last three)
      CTXKERNEL_INDEX_DIR  the index only (as --index-dir)
      `ctxkernel env` lists every variable: type, default, value, meaning
    """


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: maps errors to exit codes, never a traceback for user errors."""
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        for arg in args:
            # undecodable bytes in argv arrive as lone surrogates: refuse them here, once,
            # rather than deep inside a tokenizer, SQLite or a JSON writer
            check_text(arg, "argument")
            if "\0" in arg:  # no real argv holds one; a caller in-process could
                raise UserError(f"argument {shown(arg)} holds a NUL character")
        rv = cli.main(args=args, prog_name="ctxkernel", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ctxkernel"
        _error_line(f"{exc.format_message().rstrip('.')} (see `{where} --help`)")
        sys.exit(2)
    except click.ClickException as exc:
        _error_line(exc.format_message())
        sys.exit(2)
    except click.Abort:
        sys.exit(130)
    except UserError as exc:
        _error_line(str(exc))
        sys.exit(2)
    except BrokenPipeError:
        _quiet_broken_pipe()
        sys.exit(0)
    except OSError as exc:
        # the file system refused a path the user gave (too long, not permitted, full)
        where = f": {shown(exc.filename)}" if exc.filename else ""
        _error_line(f"{exc.strerror or exc}{where}")
        sys.exit(2)
    except KeyboardInterrupt:
        _error_line("interrupted")
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


def _error_line(message: str) -> None:
    # the first line, whatever the message holds (a lone surrogate must not end the process)
    first = message.strip().splitlines()[0] if message.strip() else "unknown error"
    first = first.encode("utf-8", "backslashreplace").decode("utf-8")
    print(f"ctxkernel: error: {first}", file=sys.stderr)


def _quiet_broken_pipe() -> None:
    # Python flushes stdout at exit and would complain again about the closed pipe.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
