"""Checks for every user on every machine: what broke for an ordinary user's install
(non-root, ``--user``, packages on ``PYTHONPATH``) and the messages that hid why."""

from __future__ import annotations

import os
import site
import subprocess
import sys
import types
from pathlib import Path

import pytest

from harness.paths import home
from harness.process import sandbox, templates, workerenv
from harness.server import daemon as checkdaemon

REPO = Path(__file__).resolve().parents[2]


def test_the_servers_module_hygiene_keeps_compiled_and_installed_modules(tmp_path: Path) -> None:
    """Forgetting torch's lazily imported C parts made the next check through the server
    fail with "bad call flags" when torch came from PYTHONPATH."""
    before = set(sys.modules)
    problem_mod = types.ModuleType("ck_problem_helper")
    problem_mod.__file__ = str(tmp_path / "ck_problem_helper.py")
    compiled = types.ModuleType("ck_fake_ext")
    compiled.__file__ = str(tmp_path / "elsewhere" / "ck_fake_ext.cpython-311-x86_64-linux-gnu.so")
    installed = types.ModuleType("ck_fake_installed")
    installed.__file__ = str(
        tmp_path / "lib" / "site-packages" / "ck_fake_installed" / "__init__.py"
    )
    sub = types.ModuleType("os.ck_fake_sub")  # a submodule of a package loaded before
    sub.__file__ = str(tmp_path / "x.py")
    for mod in (problem_mod, compiled, installed, sub):
        sys.modules[mod.__name__] = mod
    try:
        checkdaemon._drop_foreign_modules(before)
        assert "ck_problem_helper" not in sys.modules
        assert {"ck_fake_ext", "ck_fake_installed", "os.ck_fake_sub"} <= set(sys.modules)
    finally:
        for name in ("ck_problem_helper", "ck_fake_ext", "ck_fake_installed", "os.ck_fake_sub"):
            sys.modules.pop(name, None)


def test_a_user_site_install_reaches_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``pip install --user`` the worker ran with PYTHONNOUSERSITE and a moved HOME:
    torch was not importable and the verdict blamed the candidate."""
    user_site = site.getusersitepackages()
    monkeypatch.setattr(site, "ENABLE_USER_SITE", True)
    monkeypatch.setattr(sys, "path", [*sys.path, user_site])
    assert workerenv.user_site_env() == {"PYTHONUSERBASE": site.getuserbase()}
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != user_site])
    assert workerenv.user_site_env() == {"PYTHONNOUSERSITE": "1"}


def test_a_checkout_this_user_cannot_write_keeps_runs_in_the_users_data_dir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CTXKERNEL_HOME", raising=False)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert home() != REPO and home().name == "ctxkernel"


def test_a_warm_launcher_that_cannot_isolate_says_why() -> None:
    """The launcher's own error travels on the status pipe (an ``F`` line): the verdict
    said "crashed with SIGKILL" for a non-root user's failed uid map."""
    r, w = os.pipe()
    proc = templates.ForkedProcess(12345, r)
    os.write(w, b"F open /proc/self/uid_map: Permission denied\n")
    os.close(w)
    assert proc.read_pid(2.0) is None
    assert proc.returncode == sandbox.LAUNCH_FAILED
    assert proc.launch_error == "open /proc/self/uid_map: Permission denied"
    proc.close()


def test_a_spawned_launcher_that_cannot_isolate_says_why_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", sandbox.__file__, "--mode", "bogus", "--parent", "1",
         "--pid-fd", "9", "--", "true"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == sandbox.LAUNCH_FAILED
    assert done.stderr.startswith("ctxkernel sandbox: bad arguments")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_a_non_root_user_checks_with_warm_workers(tmp_path: Path) -> None:
    """As uid 65534 every warm check failed: the template's non-dumpable forks could not
    write their own uid map after unshare (their /proc/self belongs to root)."""
    code = (
        "import os, sys, json\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "os.environ['HOME'] = sys.argv[1]\n"
        "from harness.runner import LocalRunner, RunOptions, check\n"
        "v = check('examples/vector_add', 'examples/vector_add/solution_triton.py',\n"
        "          RunOptions(device='cpu', trials=1, shapes=[{'n': 1000}], record=False), LocalRunner())\n"
        "print(json.dumps({'ok': v.ok, 'reason': v.reason, 'workers': v.environment['workers'],\n"
        "                  'mode': v.environment['isolation']['mode']}))\n"
    )
    folder = tmp_path / "home"
    folder.mkdir()
    os.chmod(tmp_path, 0o755)
    os.chown(folder, 65534, 65534)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXKERNEL_HOME")}
    env["CTXKERNEL_HOME"] = str(folder / "ck")
    env["TRITON_CACHE_DIR"] = str(folder / "triton")
    readable = all(os.access(p, os.X_OK) for p in Path(sys.executable).resolve().parents)
    if not readable:
        pytest.skip("the interpreter's folders are closed to other users here")
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, cwd=REPO,
        env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    import json

    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["ok"], doc
    assert doc["workers"]["forked"] >= 1, doc  # warm, not the spawned fallback


def _site_packages() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent.parent


def _two_checks(env: dict[str, str], tmp_path: Path) -> list[str]:
    """Two checks of the honest vector add through the check server, as a user's shell
    runs them; the last line of each (the verdict)."""
    base = getattr(sys, "_base_executable", sys.executable)
    env = {**env, "CTXKERNEL_HOME": str(tmp_path / "ck"), "CTXKERNEL_CHECK_SERVER": "1",
           "CTXKERNEL_CHECK_SERVER_IDLE": "60", "HOME": str(tmp_path)}  # fmt: skip
    verdicts = []
    try:
        for _ in range(2):
            done = subprocess.run(
                [base, "-m", "ctxkernel", "check", "examples/vector_add",
                 "examples/vector_add/solution_triton.py", "--shapes", "n=1000", "--no-record"],
                capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
            verdicts.append(done.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run([base, "-m", "ctxkernel", "check-server", "stop"], env=env, cwd=REPO,
                       capture_output=True, timeout=60)  # fmt: skip
    return verdicts


def test_packages_on_pythonpath_check_twice_through_the_server(tmp_path: Path) -> None:
    """torch on PYTHONPATH: the second check through the server failed with "bad call
    flags" (the server forgot torch's C parts after the first)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(_site_packages())])
    env["PYTHONNOUSERSITE"] = "1"
    verdicts = _two_checks(env, tmp_path)
    assert all(v.startswith("verdict: PASSED") for v in verdicts), verdicts


def test_a_user_site_install_checks_twice_through_the_server(tmp_path: Path) -> None:
    """The packages in the user's site (``pip install --user``): the worker, with its own
    HOME, could not import torch and the verdict blamed the candidate."""
    userbase = tmp_path / "userbase"
    user_site = userbase / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    (user_site / "site-packages").mkdir(parents=True)
    # a .pth in the user site that puts the installed packages there, as --user would
    (user_site / "site-packages" / "zz_installed.pth").write_text(f"{_site_packages()}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONUSERBASE"] = str(userbase)
    env["PYTHONPATH"] = str(REPO)
    verdicts = _two_checks(env, tmp_path)
    assert all(v.startswith("verdict: PASSED") for v in verdicts), verdicts


@pytest.mark.parametrize(
    "how", [{"CTXKERNEL_WARM": "0"}, {"CTXKERNEL_ISOLATION": "none"}], ids=["cold", "none"]
)
@pytest.mark.parametrize(
    "candidate, passes", [("solution_triton.py", True), ("bad/off_by_one.py", False)]
)
def test_the_cli_check_gives_the_declared_verdict_cold_and_without_namespaces(
    how: dict[str, str], candidate: str, passes: bool, tmp_path: Path
) -> None:
    """``check --cold`` and a container that refuses namespaces, as whoever runs the suite
    (CI's unprivileged pass runs it as a user created for the run): the honest kernel
    passes, the off-by-one fails at correctness, each with its exit status."""
    env = {**os.environ, **how, "CTXKERNEL_HOME": str(tmp_path / "ck"), "HOME": str(tmp_path)}
    env["CTXKERNEL_CHECK_SERVER"] = "0"
    done = subprocess.run(
        [sys.executable, "-m", "ctxkernel", "check", "examples/vector_add",
         f"examples/vector_add/{candidate}", "--shapes", "n=1000", "--no-record", "--json"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )  # fmt: skip
    import json

    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    verdict = [d for d in lines if d.get("type") == "verdict"][-1]
    assert (done.returncode, verdict["ok"]) == ((0, True) if passes else (1, False)), done.stderr
    if not passes:
        assert verdict["failed_rung"] == "correctness", verdict["reason"]
    isolation = verdict["environment"]["isolation"]
    if "CTXKERNEL_ISOLATION" in how:
        assert isolation["mode"] == "none"
    else:
        assert verdict["environment"]["workers"]["forked"] == 0, verdict["environment"]["workers"]
