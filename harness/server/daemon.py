"""The check server's own process: one long-lived warm parent serving one-shot checks.

Started detached by the client (``harness/server/client.py``, which also holds what both
sides share: the fingerprint, the socket's place, the frames) as ``python -m harness
check-server serve --socket PATH --fingerprint FP``; ``harness.cli`` hands it the check to
run (``check_in_process``), so this module knows nothing of the command line.

``CheckServer`` binds its socket under a private name and renames it into place (a client
never meets a socket that does not listen yet), then serves one check at a time on the
main thread: the request's cwd, environment, stdout and stderr (``_Relay``: text to the
client as it is written) for its length, this process's own restored after, with its
``sys.path``, its warning filters, and without the modules the request imported from
outside the installed packages and the harness (a problem file and its helpers). An
accepting thread checks each peer's uid (``SO_PEERCRED``), reads the bounded request, answers
``status`` and ``stop`` at once and queues checks; a request of another fingerprint is
answered "stale". Per check a watcher thread reads the client's side: the answers of the
annotate round trip (the client runs the caller's hook, ctxkernel's index, on the verdict
before it is printed) and the socket's close, which interrupts the main thread with
SIGINT (a handler that raises only for a cancelled, running check) so the check unwinds
as an in-process Ctrl-C does. The worker templates (``harness.process.templates``) stay between
checks. It exits after ``CTXKERNEL_CHECK_SERVER_IDLE`` seconds without a check, on
SIGTERM/SIGHUP (the running check unwinds first), when its code changed on disk and when
its socket was taken over or removed, ending its templates and removing its socket.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .. import envvars
from ..errors import UsageError
from ..process.workerenv import harness_root
from .client import (
    MAX_REQUEST,
    PROTOCOL,
    Annotate,
    Frames,
    UnsafeDir,
    code_digest,
    decode_values,
    fingerprinted_env,
    peer_refused,
    secure_dir,
    send_frame,
    socket_address,
    token_matches,
    token_path,
    write_token,
)

DEFAULT_IDLE_S = envvars.CTXKERNEL_CHECK_SERVER_IDLE.default
LOOK_S = 5.0  # how often an idle server looks at its code and its socket (~177 stats)
# the check: a click callback's values and the annotate hook -> the exit code
RunCheck = Callable[[dict[str, Any], Annotate | None], int]


class _Request:
    def __init__(self, conn: socket.socket, doc: dict[str, Any], lines: Frames) -> None:
        self.conn = conn
        self.doc = doc
        self.lines = lines
        self.running = False
        self.cancelled = False
        self.gone = False
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.send_lock = threading.Lock()

    def send(self, doc: dict[str, Any]) -> None:
        if self.gone:
            return
        with self.send_lock:
            try:
                send_frame(self.conn, doc)
            except OSError:
                self.gone = True


class _Relay(io.TextIOBase):
    """A request's stdout or stderr: text goes to the client as it is written (a line at
    a time, or at each flush)."""

    def __init__(self, request: _Request, fd: int, tty: bool) -> None:
        self.request = request
        self.fd = fd
        self.tty = tty
        self.parts: list[str] = []
        self.size = 0

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.parts.append(text)
        self.size += len(text)
        if "\n" in text or self.size > 8192:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self.parts:
            data, self.parts, self.size = "".join(self.parts), [], 0
            self.request.send({"type": "out", "fd": self.fd, "data": data})


class CheckServer:
    """One server: its socket, an accepting thread, and checks run on the main thread."""

    def __init__(self, path: Path, fp: str, idle_s: float, run_check: RunCheck) -> None:
        self.path = path
        self.run_check = run_check
        self.fp = fp
        self.idle_s = idle_s
        self.code = code_digest()
        self.started = time.time()
        self.last = time.monotonic()
        self.requests = 0
        self.current: _Request | None = None
        self.waiting: queue.Queue[_Request | None] = queue.Queue()
        self.stopping = threading.Event()
        self.main_ident = threading.main_thread().ident or 0
        # the secret every request must carry, written before the socket exists: only this
        # user's processes outside every sandbox can read it (workers see neither the folder
        # nor, in none mode, any way to connect)
        self.token = write_token(path)
        self.serves = _environment()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # bind a private name, then rename it into place: a client never sees a socket
        # that does not listen yet, and a dead server's file is simply replaced
        temporary = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        with socket_address(temporary) as address:
            self.listener.bind(address)
        os.chmod(temporary, 0o600)
        self.listener.listen(64)
        os.replace(temporary, path)
        self.inode = os.lstat(path).st_ino

    # -- life --------------------------------------------------------------------------

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGHUP, self._on_term)
        signal.signal(signal.SIGINT, self._on_interrupt)
        threading.Thread(target=self._accept, name="check-server-accept", daemon=True).start()
        self._log(f"serving {self.path} (pid {os.getpid()}, idle timeout {self.idle_s:g} s)")
        reason = "stopped"
        try:
            # no warm-up imports here: the first check starts its worker template first
            # (``prestart``) and imports torch while it starts, as an in-process check does
            next_look = time.monotonic() + LOOK_S
            while not self.stopping.is_set():
                try:
                    request = self.waiting.get(timeout=0.5)
                except queue.Empty:
                    request = None
                    if time.monotonic() - self.last > self.idle_s:
                        reason = f"idle for {self.idle_s:g} s"
                        break
                if request is not None:
                    try:
                        self._serve(request)
                    except KeyboardInterrupt:
                        pass  # a cancel that arrived as the check ended
                    except Exception:  # the request's own setting (its cwd) failed
                        self._log(f"a request failed: {traceback.format_exc(limit=3)}")
                    self.last = time.monotonic()
                if time.monotonic() >= next_look:
                    next_look = time.monotonic() + LOOK_S
                    why = self._should_go()
                    if why:
                        reason = why
                        break
        except SystemExit:
            reason = "terminated"
        finally:
            self._shut(reason)
        return 0

    def _should_go(self) -> str | None:
        try:
            if os.lstat(self.path).st_ino != self.inode:
                return "its socket was taken over"
        except OSError:
            return "its socket was removed"
        if code_digest() != self.code:
            return "its code changed"
        return None

    def _on_term(self, signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        # only a cancel of the running check interrupts it; a stray SIGINT does nothing
        current = self.current
        if current is not None and current.cancelled and current.running:
            raise KeyboardInterrupt

    def _shut(self, reason: str) -> None:
        self.stopping.set()
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self.inode:
                os.unlink(self.path)
                token_path(self.path).unlink()
        with contextlib.suppress(OSError):
            self.listener.close()
        while True:  # clients still waiting get an EOF (and check in-process)
            try:
                request = self.waiting.get_nowait()
            except queue.Empty:
                break
            if request is not None:
                with contextlib.suppress(OSError):
                    request.conn.close()
        from ..process import cleanup, templates

        templates.close_all()
        cleanup.cleanup_now()
        self._log(f"exiting: {reason} ({self.requests} checks served)")

    def _log(self, message: str) -> None:
        stamp = time.strftime("%H:%M:%S")
        with contextlib.suppress(Exception):  # a log line must not take the server down
            sys.__stderr__.write(f"{stamp} check server: {message}\n")  # type: ignore[union-attr]
            sys.__stderr__.flush()  # type: ignore[union-attr]

    # -- the accepting thread ---------------------------------------------------------------

    def _accept(self) -> None:
        self.listener.settimeout(1.0)
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stopping.is_set():
                    return
                time.sleep(0.1)
                continue
            threading.Thread(target=self._admit, args=(conn,), daemon=True).start()

    def _admit(self, conn: socket.socket) -> None:
        keep = False
        try:
            refused = peer_refused(conn)
            if refused is not None:
                self._log(f"refused a client: {refused}")
                send_frame(conn, {"type": "refused", "message": refused})
                return
            conn.settimeout(10.0)
            lines = Frames(conn, MAX_REQUEST)
            try:
                doc = lines.next()
            except ValueError as exc:
                send_frame(conn, {"type": "refused", "message": str(exc)})
                return
            if doc is None:
                return
            if not token_matches(self.token, doc.get("token")):
                self._log("refused a request without this server's token")
                send_frame(
                    conn, {"type": "refused", "message": "the request lacks this server's token"}
                )
                return
            kind = doc.get("type")
            if kind == "status":
                send_frame(conn, self.status())
            elif kind == "stop":
                send_frame(conn, {"type": "stopping", "pid": os.getpid()})
                self.stopping.set()
                self.waiting.put(None)
            elif kind == "check":
                if doc.get("fingerprint") != self.fp or doc.get("protocol") != PROTOCOL:
                    send_frame(conn, {"type": "stale", "pid": os.getpid()})
                    if code_digest() != self.code:
                        self.stopping.set()
                        self.waiting.put(None)
                    return
                conn.settimeout(None)
                self.waiting.put(_Request(conn, doc, lines))
                keep = True
            else:
                send_frame(conn, {"type": "refused", "message": f"unknown request {kind!r}"})
        except OSError:
            return
        finally:
            if not keep:
                with contextlib.suppress(OSError):
                    conn.close()

    def status(self) -> dict[str, Any]:
        from ..process import templates

        current = self.current
        return {
            "type": "check_server",
            "alive": True,
            "pid": os.getpid(),
            "socket": str(self.path),
            "log": str(self.path.with_suffix(".log")),
            "fingerprint": self.fp,
            "python": sys.executable,
            "code": str(harness_root()),
            "serves": self.serves,
            "started": round(self.started, 3),
            "uptime_s": round(time.time() - self.started, 1),
            "idle_s": 0.0 if current else round(time.monotonic() - self.last, 1),
            "idle_timeout_s": self.idle_s,
            "requests": self.requests,
            "busy": current is not None,
            "waiting": self.waiting.qsize(),
            "templates": [t.describe() for t in list(templates._templates.values())],
        }

    # -- one check, on the main thread --------------------------------------------------

    def _serve(self, request: _Request) -> None:
        self.current = request
        started = time.monotonic()
        final: dict[str, Any] | None = None
        try:
            if _closed(request.conn):
                self._log("a client left before its turn")
                return
            threading.Thread(
                target=self._watch, args=(request,), name="check-server-watch", daemon=True
            ).start()
            request.send({"type": "accepted", "pid": os.getpid()})
            with _applied(request):
                request.running = True
                try:
                    final = self._check(request)
                finally:
                    request.running = False
        finally:
            self.current = None
            self.requests += 1
            if final is not None:
                request.send(final)
            with contextlib.suppress(OSError):
                request.conn.close()
            outcome = "cancelled" if final is None else f"{final['type']} {final.get('code', '')}"
            self._log(
                f"check {self.requests}: {outcome.strip()} in {time.monotonic() - started:.2f} s"
            )

    def _check(self, request: _Request) -> dict[str, Any] | None:
        values = decode_values(request.doc.get("values") or {})
        annotate = self._remote_annotate(request) if request.doc.get("annotate") else None
        try:
            code = self.run_check(values, annotate)
            sys.stdout.flush()
            sys.stderr.flush()
            return {"type": "exit", "code": int(code)}
        except UsageError as exc:
            return {"type": "usage", "message": str(exc)}
        except KeyboardInterrupt:
            return None  # the client went away: nobody to answer
        except BrokenPipeError:
            return {"type": "exit", "code": 0}  # as the command line does
        except Exception:
            return {"type": "error", "message": traceback.format_exc()}

    def _remote_annotate(self, request: _Request) -> Annotate:
        """The caller's annotate hook (ctxkernel's index), run by the client on the verdict."""

        def annotate(doc: dict[str, Any]) -> list[dict[str, Any]]:
            request.send({"type": "annotate", "doc": doc})
            while True:
                try:
                    reply = request.replies.get(timeout=0.5)
                except queue.Empty:
                    continue
                if reply is None:
                    raise KeyboardInterrupt  # the client left while annotating
                if reply.get("type") == "evidence":
                    return [dict(e) for e in reply.get("entries") or [] if isinstance(e, dict)]

        return annotate

    def _watch(self, request: _Request) -> None:
        """Read the client's side: its answers, and its going away (which cancels)."""
        while True:
            try:
                doc = request.lines.next()
            except ValueError:
                doc = None
            if doc is None:
                request.gone = True
                request.replies.put(None)
                if request.running and not request.cancelled:
                    request.cancelled = True
                    signal.pthread_kill(self.main_ident, signal.SIGINT)
                return
            request.replies.put(doc)


def _environment() -> dict[str, Any]:
    """What this server checks with: the interpreter, the libraries' versions (as loaded
    when it started), and the variables its fingerprint covers."""
    from importlib import metadata

    from ..backends import module_names

    owners = metadata.packages_distributions()
    versions = {}
    for top in ["torch", *sorted(module_names())]:
        for dist in owners.get(top, [top])[:1]:
            with contextlib.suppress(metadata.PackageNotFoundError):
                versions[dist] = metadata.version(dist)
    env = dict(fingerprinted_env())
    return {"python": sys.version.split()[0], "versions": versions, "env": env}


def _closed(conn: socket.socket) -> bool:
    """Whether the client already hung up (EOF waiting), without taking its data."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


@contextlib.contextmanager
def _applied(request: _Request) -> Iterator[None]:
    """The request's cwd, environment, umask, stdout and stderr for its length; this
    process's own (and its ``sys.path``, warning filters and modules) restored after."""
    doc = request.doc
    tty = [*(doc.get("tty") or []), False, False]
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    saved_streams = (sys.stdout, sys.stderr)
    saved_filters = list(warnings.filters)
    umask = doc.get("umask")
    saved_umask = os.umask(int(umask)) if isinstance(umask, int) else None
    # a warning shown once to an earlier request is shown again, as in a fresh process
    getattr(warnings, "_filters_mutated", lambda: None)()
    try:
        os.chdir(str(doc.get("cwd") or saved_cwd))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in (doc.get("env") or {}).items()})
        sys.stdout = _Relay(request, 1, bool(tty[0]))
        sys.stderr = _Relay(request, 2, bool(tty[1]))
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a client gone away: nothing to flush to
                stream.flush()
        sys.stdout, sys.stderr = saved_streams
        os.environ.clear()
        os.environ.update(saved_env)
        with contextlib.suppress(OSError):
            os.chdir(saved_cwd)
        sys.path[:] = saved_path
        warnings.filters[:] = saved_filters  # type: ignore[index]
        getattr(warnings, "_filters_mutated", lambda: None)()
        if saved_umask is not None:
            os.umask(saved_umask)
        _drop_foreign_modules(saved_modules)


def _drop_foreign_modules(before: set[str]) -> None:
    """Forget the modules a request imported from outside the installed packages and the
    harness (a problem file, its helpers): the next request imports its own.

    Installed means: under the interpreter's prefixes, in a ``site-packages`` or
    ``dist-packages`` folder anywhere (a ``--user`` install, packages on ``PYTHONPATH``),
    a submodule of a package this process had loaded before the request, or a compiled
    extension (which cannot be imported twice in one process: forgetting torch's lazily
    loaded C parts made the next request fail with "bad call flags")."""
    installed = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    installed |= {os.path.realpath(harness_root() / n) for n in ("harness", "ctxkernel")}
    roots = tuple(p.rstrip(os.sep) + os.sep for p in installed)
    tops = {n.partition(".")[0] for n in before}
    for name in [n for n in list(sys.modules) if n not in before]:
        if name.partition(".")[0] in tops:
            continue
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if not where:
            continue
        real = os.path.realpath(where)
        parts = real.split(os.sep)
        if real.startswith(roots) or "site-packages" in parts or "dist-packages" in parts:
            continue
        if real.endswith((".so", ".pyd")) or ".so" in os.path.basename(real):
            continue
        sys.modules.pop(name, None)


def idle_setting() -> float:
    return envvars.CTXKERNEL_CHECK_SERVER_IDLE.get()


def serve(path: Path, fp: str, run_check: RunCheck) -> int:
    """Serve at ``path`` until idle, stopped, stale or terminated. Raises ``UsageError``
    when it cannot serve there (a folder others may open, a path it cannot bind)."""
    try:
        secure_dir(path.parent, create=False)
        server = CheckServer(path, fp, idle_setting(), run_check)
    except (UnsafeDir, OSError) as exc:
        raise UsageError(f"cannot serve at {path}: {exc}") from None
    return server.run()


__all__ = ["DEFAULT_IDLE_S", "CheckServer", "RunCheck", "serve"]
