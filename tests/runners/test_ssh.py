"""The SSH runner against a real ``sshd`` on 127.0.0.1: a throwaway host key and user key
in a temp dir, a temp config (``-f``), an unprivileged port; the system's sshd config is
never read or changed. Checks run through it from the CLI, records come back here, and
the unreachable host, host key mismatch, unknown host key and host-without-harness
errors are each one clear line.

Needs Debian's ``openssh-server`` (``/usr/sbin/sshd``) and ``openssh-client``; skipped
with that reason where they are absent. Run as root, sshd insists on its privilege
separation directory ``/run/sshd``, which the fixture creates when missing (an empty
runtime directory, as the ssh service would at boot).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

from harness.runners import RunnerError, get_runner

from .conftest import VECTOR_ADD, CandidateSet, copy_of_solution, small_options

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (Path(SSHD).is_file() and shutil.which("ssh") and shutil.which("ssh-keygen")),
        reason="needs sshd and ssh (apt-get install -y openssh-server openssh-client)",
    ),
]


@dataclass
class Sshd:
    port: int
    home: Path
    known_hosts: Path
    identity: Path

    def spec(self, **extra: str) -> str:
        query = {
            "known_hosts": str(self.known_hosts),
            "identity": str(self.identity),
            "ssh_config": "none",
            "python": sys.executable,
            **extra,
        }
        user = os.environ.get("USER") or _whoami()
        text = "&".join(f"{k}={quote(v, safe='/')}" for k, v in query.items())
        return f"ssh://{user}@127.0.0.1:{self.port}?{text}"


def _whoami() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30
    )


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    home = tmp_path_factory.mktemp("sshd")
    _keygen(home / "host_key")
    _keygen(home / "user_key")
    (home / "authorized_keys").write_text((home / "user_key.pub").read_text())
    port = _free_port()
    (home / "sshd_config").write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {home / 'host_key'}",
                f"PidFile {home / 'sshd.pid'}",
                f"AuthorizedKeysFile {home / 'authorized_keys'}",
                "StrictModes no",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "PermitRootLogin prohibit-password",
                "",
            ]
        )
    )
    if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = open(home / "sshd.log", "wb")  # noqa: SIM115 - closed after sshd ends
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(home / "sshd_config")], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.skip(f"sshd did not start: {(home / 'sshd.log').read_text()[-300:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        known = home / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {(home / 'host_key.pub').read_text()}")
        yield Sshd(port, home, known, home / "user_key")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_check_through_ssh_from_the_cli(
    sshd: Sshd, tmp_path: Path, isolated_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxkernel.cli import main

    good = copy_of_solution(tmp_path, 1)
    bad = VECTOR_ADD / "bad" / "off_by_one.py"
    args = [
        "check",
        str(VECTOR_ADD),
        str(good),
        str(bad),
        "--runner",
        sshd.spec(),
        "--jobs",
        "2",
        "--device",
        "cpu",
        "--shapes",
        "n=1000;n=17",
        "--seeds",
        "2",
        "--json",
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 1, out + err
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["type"] for d in docs] == ["verdict", "verdict", "summary"]
    by_path = {Path(d["path"]).name: d for d in docs[:2]}
    assert by_path[good.name]["ok"] is True
    assert by_path[bad.name]["failed_rung"] == "correctness"
    summary = docs[2]
    assert summary["total"] == 2 and summary["passed"] == 1 and summary["failed"] == 1
    assert summary["runner"].startswith("ssh://") and summary["batch"]
    for doc in docs[:2]:
        runner = doc["environment"]["runner"]
        assert runner["kind"] == "ssh" and runner["host"].endswith(f"127.0.0.1:{sshd.port}")
        assert runner["host_torch"]
        # the record came back: it is under this machine's runs dir, source and logs included
        run_dir = Path(doc["run_dir"])
        assert run_dir.is_relative_to(isolated_home / "runs" / "vector_add")
        names = {p.name for p in run_dir.iterdir()}
        assert {"result.json", "feedback.txt", Path(doc["path"]).name} <= names
        assert any(n.startswith("worker") and n.endswith(".log") for n in names)
        kept = json.loads((run_dir / "result.json").read_text())
        assert kept["run_dir"] == str(run_dir) and kept["candidate"] == doc["path"]


def test_unreachable_host_is_one_clear_error(sshd: Sshd, vector_add_set: CandidateSet) -> None:
    closed = _free_port()
    spec = sshd.spec().replace(f":{sshd.port}?", f":{closed}?")
    runner = get_runner(spec)
    with pytest.raises(
        RunnerError, match=rf"cannot reach .*127\.0\.0\.1:{closed}.*Connection refused"
    ):
        list(
            runner.run_many(vector_add_set.problem, vector_add_set.candidates[:1], small_options())
        )


def test_host_key_mismatch_refuses_to_connect(
    sshd: Sshd, vector_add_set: CandidateSet, tmp_path: Path
) -> None:
    _keygen(tmp_path / "impostor")
    forged = tmp_path / "known_hosts"
    forged.write_text(f"[127.0.0.1]:{sshd.port} {(tmp_path / 'impostor.pub').read_text()}")
    runner = get_runner(sshd.spec(known_hosts=str(forged)))
    with pytest.raises(RunnerError, match=r"host key of .* does NOT match"):
        list(
            runner.run_many(vector_add_set.problem, vector_add_set.candidates[:1], small_options())
        )
    assert forged.read_text().count("\n") == 1  # nothing was added or replaced


def test_unknown_host_key_is_never_accepted(
    sshd: Sshd, vector_add_set: CandidateSet, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    runner = get_runner(sshd.spec(known_hosts=str(empty)))
    with pytest.raises(RunnerError, match=r"is not in .*ssh-keyscan"):
        list(
            runner.run_many(vector_add_set.problem, vector_add_set.candidates[:1], small_options())
        )
    assert empty.read_text() == ""


def test_host_without_the_harness(sshd: Sshd, vector_add_set: CandidateSet, tmp_path: Path) -> None:
    bare = tmp_path / "bare-venv"
    venv.create(bare, with_pip=False)  # a python with neither torch nor the harness
    python = str(bare / "bin" / "python")
    runner = get_runner(sshd.spec(python=python, harness="installed"))
    with pytest.raises(
        RunnerError,
        match=r"lacks the harness: .*No module named 'torch'.*(README|docs/operations\.md)",
    ):
        list(
            runner.run_many(vector_add_set.problem, vector_add_set.candidates[:1], small_options())
        )
    missing = get_runner(sshd.spec(python=str(tmp_path / "no-such-python")))
    with pytest.raises(RunnerError, match=r"has no .*no-such-python"):
        list(
            missing.run_many(vector_add_set.problem, vector_add_set.candidates[:1], small_options())
        )
