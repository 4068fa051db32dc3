"""The check server: a per-user background process that keeps a warm parent for one-shot checks.

A one-shot ``ctxkernel check`` (or ``python -m harness check``) of one candidate pays for
importing torch and triton, initialising the device and starting a worker template
(``templates.py``) every time; a long-lived parent (the agent, ``ctxkernel mcp``) pays it
once. This module gives the command line that long-lived parent, the way dmypy or the
gradle daemon do, in two halves:

- the **client** (``check_through_server``, called by ``harness.cli.check_from_cli`` for a
  single local check) imports nothing heavy (no torch, triton or ladder). It connects to
  a Unix socket named after its *fingerprint*; with no live server there it starts one
  detached (``python -m harness check-server serve``: its own session, stdin and stdout on
  /dev/null, stderr in a log beside the socket) and waits a bounded time for it. It sends
  the check's parsed options, its cwd and its environment, relays what the server prints
  (stdout to stdout, stderr to stderr, as it comes) and returns the server's exit code. A
  usage error comes back as one and is raised here, so each command line prints its own
  one line and exits 2. When no server can be had it says so in one line on stderr and
  the caller checks in-process, as without a server.
- the **server** (``harness/server/daemon.py``, its own process) serves one check at a
  time with the request's cwd, environment, stdout and stderr, keeps the worker
  templates between checks, and exits when idle (``CTXKERNEL_CHECK_SERVER_IDLE``, default
  600 s), stopped, terminated, or when its code changed on disk.

The fingerprint (which server a client may use) covers the interpreter, the uid, every
``harness``/``ctxkernel`` source file's path, size and mtime (edited code means a new
server), the worker environment's fingerprint (``workerenv.fingerprint``) and the
variables read when a library is imported or a cache is placed (``CTXKERNEL_*``,
``TRITON_*``, ``CUDA_*``, ``TMPDIR``, ``HOME``, ...) and the libraries it checks with (torch,
triton, nvidia-cutlass-dsl, tilelang, numpy: their folders and install records; the CUDA
driver and ``nvcc``), so a reinstalled library gets a new server. A server refuses a
request with another fingerprint ("stale"); the client then starts a new one. At most
``MAX_SERVERS`` live at once per user: starting another retires the oldest idle ones;
``status`` says which environment each serves.

Safety: the socket lives in a directory only the user can open (``$XDG_RUNTIME_DIR/ctxkernel``,
or ``check-server/`` in the ctxkernel cache dir when ``CTXKERNEL_HOME`` is set or there is no
runtime dir); a directory that others may open, or that another uid owns, is refused. Both
ends check the peer's uid (``SO_PEERCRED``); a request is bounded; a server that dies is an
EOF to the client (one line, exit 2, once output was relayed; a quiet fallback before),
and every request carries the server's token (a secret in a 0600 file beside its socket,
written before the socket exists): a process that can connect but not read the folder --
a worker in ``none`` mode that got past seccomp -- is refused. Neither the server nor the
requests hold the user's secret variables (``without_secrets``);
never a hang; a client that goes away (Ctrl-C) cancels its check in the server.

Off with ``--no-server`` or ``CTXKERNEL_CHECK_SERVER=0``; not used with ``CTXKERNEL_WARM=0``,
``--cold``, several candidates or ``--runner``/``--jobs``/``--resume`` (``harness/cli.py``
decides). ``ctxkernel check-server status|stop`` lists and ends this user's servers.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import envvars
from ..errors import UsageError
from ..paths import check_server_dir
from ..process.workerenv import harness_root

ENV_SWITCH = envvars.CTXKERNEL_CHECK_SERVER.name
ENV_IDLE = envvars.CTXKERNEL_CHECK_SERVER_IDLE.name
START_TIMEOUT_S = 20.0  # the server binds its socket before its heavy imports
MAX_REQUEST = 1 << 20  # a request's bytes (options, cwd, environment)
MAX_FRAME = 1 << 28  # a frame the client accepts (a verdict's JSON is ~100 KB)
PROTOCOL = 1
# read when a library is imported or a cache path is first computed: a server started with
# other values would check differently (the rest of the environment is set per request)
FINGERPRINT_PREFIXES = (
    "CTXKERNEL_",
    "TRITON_",
    "TORCH",
    "PYTORCH_",
    "CUDA_",
    "NVIDIA_",
    "CUTE_DSL_",
    "CUTLASS_",
    "TILELANG_",
    "TVM_",
    "PYTHON",
    "LD_",
    "OMP_",
    "MKL_",
    "KMP_",
)
FINGERPRINT_NAMES = ("HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")
NOT_FINGERPRINTED = (ENV_SWITCH,)  # and everything starting with it (the server's own knobs)
Annotate = Callable[[dict[str, Any]], list[dict[str, Any]]]


class UnsafeDir(RuntimeError):
    """The socket directory could be opened by someone else: it is not used."""


# -- the switch, the fingerprint, the place ------------------------------------------------


def enabled(env: dict[str, str] | None = None) -> bool:
    """Whether a one-shot check may go through a server (the options decide the rest)."""
    if not (envvars.CTXKERNEL_CHECK_SERVER.get(env) and envvars.CTXKERNEL_WARM.get(env)):
        return False
    return not envvars.CTXKERNEL_WORKER.get(env)  # never from inside a worker


def code_files() -> list[tuple[str, int, int]]:
    """(path, size, mtime_ns) of every source file of the harness and ctxkernel packages."""
    out: list[tuple[str, int, int]] = []
    root = harness_root()
    stack = [root / "harness", root / "ctxkernel"]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name == "__pycache__" or entry.name.startswith("."):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.name.endswith(".py"):
                with contextlib.suppress(OSError):
                    info = entry.stat()
                    out.append((entry.path, info.st_size, info.st_mtime_ns))
    return sorted(out)


def code_digest() -> str:
    return hashlib.sha256(repr(code_files()).encode()).hexdigest()[:16]


def fingerprinted_env(env: dict[str, str] | None = None) -> list[tuple[str, str]]:
    env = dict(os.environ) if env is None else env
    return sorted(
        (k, v)
        for k, v in env.items()
        if (k.startswith(FINGERPRINT_PREFIXES) or k in FINGERPRINT_NAMES)
        and not k.startswith(NOT_FINGERPRINTED)
        and k != "PYTHONPATH"  # the worker fingerprint has the resolved one
    )


# the libraries a check's verdict depends on: a server that imported an older copy of one
# must not answer for the new one (found without importing them: the client stays light)
FINGERPRINTED_PACKAGES = ("torch", "numpy")  # and every backend's modules (backends/)
MAX_SERVERS = 3  # live servers per user; starting one more retires the oldest idle ones


def installed_libraries() -> dict[str, str]:
    """Each library of ``FINGERPRINTED_PACKAGES`` and of the backends as found now: its
    folder, and the size and
    mtime of its ``__init__.py`` and of its distribution's ``RECORD`` (a reinstall or an
    edit changes them); the CUDA driver's version and the ``nvcc`` on ``PATH``."""
    import importlib.util
    import shutil

    from ..backends import module_names

    found: dict[str, str] = {}
    for name in dict.fromkeys([*FINGERPRINTED_PACKAGES, *sorted(module_names())]):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        if not origin:
            continue
        folder = os.path.dirname(os.path.realpath(origin))
        marks = [_stat_mark(origin)]
        parent = os.path.dirname(folder)
        with contextlib.suppress(OSError):
            for entry in os.scandir(parent):
                low = entry.name.lower().replace("-", "_")
                if entry.name.endswith(".dist-info") and low.startswith(name + "_"):
                    marks.append(entry.name + ":" + _stat_mark(os.path.join(entry.path, "RECORD")))
        found[name] = f"{folder} {' '.join(marks)}"
    with contextlib.suppress(OSError), open("/proc/driver/nvidia/version") as fh:
        found["cuda_driver"] = fh.readline().strip()
    nvcc = shutil.which("nvcc")
    if nvcc:
        found["nvcc"] = f"{os.path.realpath(nvcc)} {_stat_mark(nvcc)}"
    return found


def _stat_mark(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "-"
    return f"{info.st_size}:{info.st_mtime_ns}"


def fingerprint(code: str | None = None) -> str:
    """Which server this process may use: interpreter, uid, code, the installed libraries
    it checks with, environment."""
    from ..process.workerenv import fingerprint as worker_fingerprint

    items = [
        ("protocol", PROTOCOL),
        ("python", os.path.realpath(sys.executable)),
        ("uid", os.getuid()),
        ("code", code or code_digest()),
        ("libraries", sorted(installed_libraries().items())),
        ("worker", worker_fingerprint()),
        ("env", fingerprinted_env()),
    ]
    return hashlib.sha256(repr(items).encode()).hexdigest()[:24]


def retire_oldest(keep: int = MAX_SERVERS - 1) -> list[int]:
    """Stop this user's oldest idle servers until at most ``keep`` are alive (a server is
    about to start). Returns the PIDs asked to stop."""
    alive = [d for d in servers() if d.get("alive")]
    idle = sorted((d for d in alive if not d.get("busy")), key=lambda d: d.get("started", 0.0))
    stopped = []
    while len(alive) > keep and idle:
        doc = idle.pop(0)
        if ask(Path(str(doc["socket"])), {"type": "stop"}) is not None:
            stopped.append(int(doc.get("pid", 0)))
        alive = [d for d in alive if d is not doc]
    return stopped


def secure_dir(folder: Path, create: bool = True) -> Path:
    """``folder`` made (0700) or checked: a real directory of this uid that no one else
    may open, in a parent no one else may rename it in. Raises ``UnsafeDir``."""
    if create and not os.path.lexists(folder):
        folder.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
    try:
        info = os.lstat(folder)
        parent = os.stat(folder.parent)
    except OSError as exc:
        raise UnsafeDir(f"check server: cannot use {folder}: {exc.strerror}") from None
    me = os.getuid()
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeDir(f"check server: {folder} is not a directory (a link or a file)")
    if info.st_uid != me:
        raise UnsafeDir(f"check server: {folder} belongs to uid {info.st_uid}, not {me}")
    if info.st_mode & 0o077:
        raise UnsafeDir(
            f"check server: {folder} is open to others (mode {stat.S_IMODE(info.st_mode):o}, "
            "needs 700)"
        )
    if parent.st_uid not in (me, 0) or (
        parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX
    ):
        raise UnsafeDir(f"check server: others may replace {folder} (its parent's owner or mode)")
    return folder


@contextlib.contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """A name ``bind``/``connect`` accept for ``path``: itself, or (past the 107 bytes a
    Unix socket's name may hold) the same file through an open handle of its folder."""
    if len(os.fsencode(path)) < 100:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def token_path(path: Path) -> Path:
    return path.with_suffix(".token")


def write_token(path: Path) -> str:
    """A fresh secret for the server at ``path``, in a 0600 file beside its socket."""
    token = secrets.token_hex(32)
    target = token_path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    os.replace(temporary, target)
    return token


def read_token(path: Path) -> str:
    """The token of the server at ``path`` ('' when there is none to read)."""
    try:
        return token_path(path).read_text().strip()[:128]
    except OSError:
        return ""


def token_matches(expected: str, given: object) -> bool:
    return isinstance(given, str) and bool(expected) and hmac.compare_digest(expected, given)


def without_secrets(env: dict[str, str]) -> dict[str, str]:
    """``env`` less the variables that look like secrets: a check needs none of them, and a
    process that never holds a key cannot leak it."""
    from ..redact import secret_env_names

    drop = set(secret_env_names(env))
    return {k: v for k, v in env.items() if k not in drop}


def peer_uid(conn: socket.socket) -> int:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def peer_refused(conn: socket.socket, uid: int | None = None) -> str | None:
    """Why the process at the other end may not talk to this one (None: it may)."""
    me = os.getuid() if uid is None else uid
    try:
        theirs = peer_uid(conn)
    except OSError as exc:
        return f"cannot read the peer's credentials ({exc.strerror})"
    return None if theirs == me else f"uid {theirs} may not use uid {me}'s check server"


# -- frames: one JSON document per line -----------------------------------------------------


def send_frame(conn: socket.socket, doc: dict[str, Any]) -> None:
    conn.sendall(json.dumps(doc).encode() + b"\n")


class Frames:
    """The JSON documents arriving on a stream socket, one per line, each at most ``limit``
    bytes; ``None`` at EOF (or when the connection broke)."""

    def __init__(self, conn: socket.socket, limit: int) -> None:
        self.conn = conn
        self.limit = limit
        self.buffer = b""

    def next(self) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            if len(self.buffer) > self.limit:
                raise ValueError(f"a message longer than {self.limit} bytes")
            try:
                chunk = self.conn.recv(1 << 16)
            except (ConnectionError, TimeoutError, OSError):
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        if len(line) > self.limit:
            raise ValueError(f"a message longer than {self.limit} bytes")
        doc = json.loads(line)
        if not isinstance(doc, dict):
            raise ValueError("a message is not a JSON object")
        return doc


def encode_values(value: Any) -> Any:
    """A click callback's values as JSON (paths and tuples tagged); TypeError otherwise."""
    if isinstance(value, Path):
        return {"$path": str(value)}
    if isinstance(value, tuple):
        return {"$tuple": [encode_values(v) for v in value]}
    if isinstance(value, list):
        return [encode_values(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode_values(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot send a {type(value).__name__}")


def decode_values(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$path"}:
            return Path(value["$path"])
        if set(value) == {"$tuple"}:
            return tuple(decode_values(v) for v in value["$tuple"])
        return {k: decode_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_values(v) for v in value]
    return value


# -- the client -----------------------------------------------------------------------------


def _note(message: str) -> None:
    print(f"{message}; checking in-process", file=sys.stderr, flush=True)


def _connect(path: Path, timeout_s: float = 2.0) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout_s)
        with socket_address(path) as address:
            conn.connect(address)
        conn.settimeout(None)
    except OSError:
        conn.close()
        return None
    if peer_refused(conn) is not None:  # the folder is ours: cannot happen but by a bug
        conn.close()
        return None
    return conn


def _unlink_dead(path: Path) -> None:
    """Remove a socket file nobody listens on (a server that was killed)."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(path).st_mode) and _connect(path, 0.5) is None:
            os.unlink(path)


def _start(place: Path, path: Path, fp: str) -> socket.socket | str:
    """Start a server for ``fp`` (one client at a time: a lock beside the socket) and
    connect to it; a reason (str) when it could not be had within ``START_TIMEOUT_S``."""
    deadline = time.monotonic() + START_TIMEOUT_S
    log = place / f"{fp}.log"
    fd = os.open(place / f"{fp}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return f"another client held the check server's start lock for {START_TIMEOUT_S:g} s"
                time.sleep(0.02)
        conn = _connect(path)
        if conn is not None:
            return conn  # started by the client that held the lock
        _unlink_dead(path)
        retire_oldest()
        env = without_secrets(dict(os.environ))
        python_path = [str(harness_root())] + [
            p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
        ]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(python_path))
        cmd = [sys.executable, "-m", "harness", "check-server", "serve"]
        cmd += ["--socket", str(path), "--fingerprint", fp]
        with open(log, "wb") as err:
            os.chmod(log, 0o600)
            proc = subprocess.Popen(
                cmd,
                cwd=place,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                close_fds=True,
            )
        while time.monotonic() < deadline:
            conn = _connect(path)
            if conn is not None:
                return conn
            if proc.poll() is not None:
                return f"the check server exited at start (exit {proc.returncode}, log {log})"
            time.sleep(0.02)
        return f"the check server did not start within {START_TIMEOUT_S:g} s (log {log})"
    finally:
        os.close(fd)  # releases the lock


class _Stale(Exception):
    """The server at our socket has another fingerprint (or code): start a new one."""


class _Gone(Exception):
    """The server ended before it answered anything: check in-process."""


def check_through_server(values: dict[str, Any], annotate: Annotate | None = None) -> int | None:
    """Run one check (a click callback's ``values``) in this user's check server and
    relay its output; the exit code, or None when no server could serve it (then one
    line on stderr says why, and the caller checks in-process). Raises ``UsageError``
    for the usage errors the check found, as an in-process check would."""
    try:
        place = secure_dir(check_server_dir())
    except UnsafeDir as exc:
        _note(str(exc))
        return None
    except OSError as exc:
        _note(f"check server: cannot make its folder ({exc.strerror})")
        return None
    fp = fingerprint()
    path = place / f"{fp}.sock"
    try:
        request = {
            "type": "check",
            "protocol": PROTOCOL,
            "fingerprint": fp,
            "values": encode_values(values),
            "cwd": os.getcwd(),
            "env": without_secrets(dict(os.environ)),
            "umask": _umask(),
            "annotate": annotate is not None,
            "tty": [_isatty(sys.stdout), _isatty(sys.stderr)],
        }
        payload = json.dumps(request).encode() + b"\n"
    except (TypeError, ValueError, OSError) as exc:
        _note(f"check server: cannot send this check ({exc})")
        return None
    if len(payload) > MAX_REQUEST:
        _note(f"check server: the request is over {MAX_REQUEST} bytes (a large environment)")
        return None
    for attempt in range(2):
        conn = _connect(path)
        if conn is None:
            started = _start(place, path, fp)
            if isinstance(started, str):
                _note(started)
                return None
            conn = started
        signed = json.dumps({**request, "token": read_token(path)}).encode() + b"\n"
        try:
            return _converse(conn, signed, annotate, place / f"{fp}.log")
        except _Stale:
            _unlink_dead(path)
            if attempt == 0:
                time.sleep(0.1)  # the stale server removes its socket as it goes
                continue
            _note("check server: the server at its socket keeps answering 'stale'")
            return None
        except _Gone as exc:
            _note(str(exc))
            return None
        finally:
            conn.close()
    return None


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _converse(conn: socket.socket, payload: bytes, annotate: Annotate | None, log: Path) -> int:
    lines = Frames(conn, MAX_FRAME)
    try:
        conn.sendall(payload)
    except OSError as exc:
        # a server that refuses the peer answers and closes before reading: its reason
        # is in our receive buffer, and says more than the broken pipe
        said = _last_word(lines)
        if said is not None and said.get("type") == "refused":
            raise _Gone(f"check server: refused ({said.get('message')})") from None
        raise _Gone(f"check server: sending the check failed ({exc.strerror})") from None
    server = "the check server"
    relayed = False
    while True:
        try:
            doc = lines.next()
        except ValueError as exc:
            raise UsageError(f"check server: a bad answer ({exc})") from None
        if doc is None:
            if relayed:
                raise UsageError(
                    f"{server} ended during the check (log {log}); run it again, or with "
                    "--no-server"
                )
            raise _Gone(f"{server} ended before it answered (log {log})")
        kind = doc.get("type")
        if kind == "accepted":
            server = f"the check server (pid {doc.get('pid')})"
        elif kind == "out":
            stream = sys.stdout if doc.get("fd") == 1 else sys.stderr
            stream.write(str(doc.get("data", "")))
            stream.flush()
            relayed = True
        elif kind == "annotate":
            entries = annotate(dict(doc.get("doc") or {})) if annotate is not None else []
            send_frame(conn, {"type": "evidence", "entries": entries})
        elif kind == "exit":
            return int(doc.get("code", 1))
        elif kind == "usage":
            raise UsageError(str(doc.get("message") or "usage error"))
        elif kind == "error":
            sys.stderr.write(str(doc.get("message", "")))
            sys.stderr.flush()
            return 1
        elif kind == "stale":
            raise _Stale()
        elif kind == "refused":
            raise _Gone(f"check server: refused ({doc.get('message')})")


def _last_word(lines: Frames) -> dict[str, Any] | None:
    """The frame a server sent before it closed, if any (never raises)."""
    try:
        return lines.next()
    except (ValueError, OSError):
        return None


def ask(path: Path, doc: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any] | None:
    """One question (``status``, ``stop``) to the server at ``path``; None if none answers."""
    conn = _connect(path, timeout_s)
    if conn is None:
        return None
    try:
        conn.settimeout(timeout_s)
        send_frame(conn, {**doc, "token": read_token(path)})
        return Frames(conn, MAX_FRAME).next()
    except (OSError, ValueError):
        return None
    finally:
        conn.close()


def servers() -> list[dict[str, Any]]:
    """This user's check servers: each live one's status, and the sockets nobody serves."""
    place = check_server_dir()
    try:
        secure_dir(place, create=False)
        sockets = sorted(place.glob("*.sock"))
    except (UnsafeDir, OSError):
        return []
    found = []
    for path in sockets:
        doc = ask(path, {"type": "status"})
        found.append(doc if doc is not None else {"socket": str(path), "alive": False})
    return found


def stop_servers(timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Ask every server of this user to stop; SIGTERM one still there after ``timeout_s``."""
    stopped = []
    for doc in servers():
        if not doc.get("alive"):
            _unlink_dead(Path(doc["socket"]))
            continue
        pid = int(doc["pid"])
        ask(Path(doc["socket"]), {"type": "stop"})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process_running(pid):
            time.sleep(0.05)
        if process_running(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        stopped.append({**doc, "stopped": True})
    return stopped


def process_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (the test's own child) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def print_status(as_json: bool, echo: Callable[[str], None] = print) -> int:
    found = servers()
    if as_json:
        for doc in found:
            echo(json.dumps({**doc, "type": "check_server"}))
        echo(json.dumps({"type": "summary", "running": sum(1 for d in found if d.get("alive")),
                         "dir": str(check_server_dir())}))  # fmt: skip
        return 0
    if not found:
        echo(f"no check server running (sockets in {check_server_dir()})")
    for doc in found:
        if not doc.get("alive"):
            echo(f"dead socket {doc['socket']}")
            continue
        state = "busy" if doc.get("busy") else f"idle {doc.get('idle_s')} s"
        echo(
            f"pid {doc['pid']}  up {doc.get('uptime_s')} s  {state}  {_checks(doc.get('requests'))}  "
            f"exits after {doc.get('idle_timeout_s'):g} s idle  code {doc.get('code')}  "
            f"log {doc.get('log')}"
        )
        serves = dict(doc.get("serves") or {})
        if serves:
            libs = ", ".join(f"{k} {v}" for k, v in dict(serves.get("versions") or {}).items())
            echo(f"  serves: python {serves.get('python')}; {libs or 'no libraries found'}")
            extra = dict(serves.get("env") or {})
            if extra:
                echo("  with: " + " ".join(f"{k}={v}" for k, v in extra.items()))
    return 0


def _checks(count: object) -> str:
    return f"{count} check" if count == 1 else f"{count} checks"


def print_stop(as_json: bool, echo: Callable[[str], None] = print) -> int:
    stopped = stop_servers()
    if as_json:
        for doc in stopped:
            echo(
                json.dumps({"type": "stopped", "pid": doc.get("pid"), "socket": doc.get("socket")})
            )
        echo(json.dumps({"type": "summary", "stopped": len(stopped)}))
    elif not stopped:
        echo("no check server was running")
    else:
        for doc in stopped:
            echo(f"stopped pid {doc.get('pid')}")
    return 0


__all__ = [
    "ENV_IDLE",
    "ENV_SWITCH",
    "MAX_FRAME",
    "MAX_REQUEST",
    "PROTOCOL",
    "Annotate",
    "Frames",
    "UnsafeDir",
    "check_through_server",
    "code_digest",
    "decode_values",
    "enabled",
    "encode_values",
    "fingerprint",
    "peer_refused",
    "process_running",
    "secure_dir",
    "send_frame",
    "servers",
    "socket_address",
    "stop_servers",
]
