"""A real terminal for tests: a private tmux server (its own socket under the test's temp
dir) running one command in a pane of a fixed size; keys go in with ``send-keys``, the
screen comes back with ``capture-pane``."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

WIDTH, HEIGHT = 150, 50


def need_tmux() -> str:
    path = shutil.which("tmux")
    if path is None:
        pytest.skip("needs tmux (apt-get install tmux; .ci/run installs it)")
    return path


class Tmux:
    """One tmux session; ``close`` kills its server."""

    def __init__(self, socket: Path, name: str = "t") -> None:
        self.tmux = need_tmux()
        if len(str(socket)) > 90:  # a Unix socket path has a length limit (about 100)
            socket = Path(tempfile.mkdtemp(prefix="ck-tmux-")) / "s"
        self.socket = socket
        self.name = name
        self.exit_log: Path | None = None

    def _run(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([self.tmux, "-S", str(self.socket), *args],
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> None:
        """Run ``argv`` in a new pane; its exit status goes to ``log``, and the pane stays
        open after it exits so the screen can still be read."""
        self.exit_log = log
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = (f"cd {shlex.quote(str(cwd))} && env -i {assignments} "
                   f"{shlex.join(argv)}; echo \"exit=$?\" > {shlex.quote(str(log))}; sleep 600")  # fmt: skip
        self._run("-f", "/dev/null", "new-session", "-d", "-s", self.name,
                  "-x", str(WIDTH), "-y", str(HEIGHT), command)  # fmt: skip
        self._run("set-option", "-t", self.name, "history-limit", "20000")

    def send(self, text: str, enter: bool = True) -> None:
        if text:
            self._run("send-keys", "-t", self.name, "-l", text)
        if enter:
            self._run("send-keys", "-t", self.name, "Enter")

    def screen(self, history: bool = True) -> str:
        """What the pane shows (with the scrollback above it)."""
        args = ["capture-pane", "-p", "-J", "-t", self.name]
        if history:
            args += ["-S", "-"]
        return self._run(*args)

    def wait_for(
        self, check: Callable[[str], bool] | str, timeout: float = 90.0, what: str = ""
    ) -> str:
        """Poll the screen until ``check`` holds (a string: appears); the screen."""
        test = (lambda s: check in s) if isinstance(check, str) else check
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if test(screen):
                return screen
            if self.exit_log is not None and self.exit_log.exists():
                raise AssertionError(
                    f"the command ended ({self.exit_log.read_text().strip()}) before "
                    f"{what or check!r}; the screen:\n{self.screen()}"
                )
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what or check!r}; the screen:\n{screen}")

    def exit_status(self, timeout: float = 60.0) -> str:
        """``exit=N`` once the command has ended."""
        assert self.exit_log is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.exit_log.exists() and self.exit_log.read_text().strip():
                return self.exit_log.read_text().strip()
            time.sleep(0.1)
        raise AssertionError(f"the command did not end; the screen:\n{self.screen()}")

    def close(self) -> None:
        self._run("kill-server", check=False)
