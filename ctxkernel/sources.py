"""Sources: where a corpus's files come from — git, a plain directory, an installed
Python package, or an HTTP documentation page — materialised as a local Snapshot.

``resolve_source(corpus, arg)`` picks the source: the corpus definition's default, or
what ``--source`` names (a git URL, a local git repo or bare mirror, a directory,
``pkg:<distribution>``, an http(s) page or a local file). Clones and downloads live
in the cache directory, never in the repository.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from harness import envvars, paths

from .corpus import Corpus, PackageSpec
from .errors import UserError

Progress = Callable[[str, int, int], None]  # (stage, done, total)

GIT_TIMEOUT_S = 900
PROBE_TIMEOUT_S = 10
# A git server that accepts the connection and then says nothing would hold a fetch
# forever: a git process that shows no progress for this long is killed (its process
# group: git-remote-http and ssh too). CTXKERNEL_GIT_STALL_S sets how long (default 60 s).


@dataclass(frozen=True)
class SourceFile:
    path: str  # upstream-relative posix path (what citations show)
    local: Path  # where the bytes are on this machine


@dataclass
class Snapshot:
    kind: str  # git | dir | pkg | http | file
    origin: str  # what was asked for, for people ("https://...@main", "pkg:triton")
    version: str  # commit SHA, package version(s), or content hash
    ref: str  # what upstream links use (commit SHA, tag)
    root: Path
    files: list[SourceFile] = field(default_factory=list)
    skipped_links: int = 0  # symlinks leaving the root, never followed


class Source:
    """A place files come from. ``materialize`` brings them local; ``upstream_version``
    says what the upstream holds now (None when it cannot be reached)."""

    kind = "source"

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus

    @property
    def origin(self) -> str:
        raise NotImplementedError

    def materialize(self, progress: Progress | None = None) -> Snapshot:
        raise NotImplementedError

    def upstream_version(self) -> str | None:
        return None


# --- git -----------------------------------------------------------------------------


def _is_git_dir(path: Path) -> bool:
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


class GitSource(Source):
    """A git repository (URL, local repo or bare mirror), shallow-cloned at a ref."""

    kind = "git"

    def __init__(self, corpus: Corpus, url: str, ref: str = "") -> None:
        super().__init__(corpus)
        self.url = url
        self.ref = ref or corpus.source.ref or "HEAD"
        local = Path(url).expanduser()
        self.fetch_url = local.resolve().as_uri() if local.exists() else url

    @property
    def origin(self) -> str:
        return f"{self.url}@{self.ref}"

    def clone_dir(self) -> Path:
        digest = hashlib.sha1(self.fetch_url.encode()).hexdigest()[:10]
        return paths.cache_dir() / "clones" / f"{self.corpus.name}-{digest}"

    def materialize(self, progress: Progress | None = None) -> Snapshot:
        import git  # gitpython; imported late to keep CLI start-up light

        target = self.clone_dir()
        target.parent.mkdir(parents=True, exist_ok=True)
        if progress:
            progress(f"fetching {self.origin}", 0, 1)
        fresh = not (target / ".git").is_dir()
        done = False
        try:
            repo = git.Repo.init(target) if fresh else git.Repo(target)
            if "origin" in [r.name for r in repo.remotes]:
                repo.remotes.origin.set_url(self.fetch_url)
            else:
                repo.create_remote("origin", self.fetch_url)
            self._fetch(repo)
            repo.git.checkout("--force", "--detach", "FETCH_HEAD")
            repo.git.clean("-fdxq")
            sha = repo.head.commit.hexsha
            done = True
        except GitFailed as exc:
            raise UserError(self._unreachable(exc)) from None
        except git.GitCommandError as exc:
            raise UserError(self._unreachable(exc)) from exc
        finally:
            if fresh and not done:
                # a clone that never got a commit is an empty repository: the next run
                # would take it for a clone to update, and it holds nothing to keep
                shutil.rmtree(target, ignore_errors=True)
        if progress:
            progress(f"fetched {sha[:12]}", 1, 1)
        files, skipped = _tracked_files(target, repo)
        return Snapshot("git", self.origin, sha, sha, target, files, skipped)

    def _fetch(self, repo: object) -> None:
        import git

        assert isinstance(repo, git.Repo)
        where = Path(str(repo.working_tree_dir))
        fetch = ["fetch", "--progress", "--depth", "1", "--no-tags", "origin"]
        try:
            run_git([*fetch, self.ref], where, self.origin)
        except GitFailed as exc:
            # a mirror whose default branch has another name; not after a stall: the
            # server did not answer, and asking again would wait the limit out twice
            if self.ref in ("main", "master") and not exc.stalled:
                run_git([*fetch, "HEAD"], where, self.origin)
            else:
                raise

    def _unreachable(self, exc: Exception) -> str:
        text = str(exc) if isinstance(exc, GitFailed) else str(getattr(exc, "stderr", "") or exc)
        detail = " ".join(text.split())[:200]
        return (
            f"cannot fetch {self.origin}: {detail}; index from a local copy instead with "
            "--source (a git mirror or repo path, a directory, or pkg:NAME)"
        )

    def upstream_version(self) -> str | None:
        try:
            out = run_git(
                ["ls-remote", self.fetch_url, self.ref],
                None,
                self.origin,
                limit_s=PROBE_TIMEOUT_S,
                stall_s=min(PROBE_TIMEOUT_S, envvars.CTXKERNEL_GIT_STALL_S.get()),
            )
        except GitFailed:
            return None
        return out.split()[0] if out.strip() else None


class GitFailed(Exception):
    """A git command failed, or was killed for showing no progress (``stalled``: another
    try would only wait as long again); the message says which."""

    def __init__(self, message: str, stderr: str = "", *, stalled: bool = False) -> None:
        super().__init__(message)
        self.stderr = stderr
        self.stalled = stalled


def run_git(
    args: list[str],
    cwd: Path | None,
    what: str,
    *,
    limit_s: float = GIT_TIMEOUT_S,
    stall_s: float | None = None,
) -> str:
    """Run ``git ARGS`` and return its stdout. GitFailed when it fails, when it shows no
    progress (nothing on stdout or stderr) for ``stall_s`` seconds, or when it runs past
    ``limit_s``: the whole process group is killed then, so nothing waits on a server
    that accepted the connection and never answered. Never prompts for credentials."""
    stall = stall_s if stall_s is not None else envvars.CTXKERNEL_GIT_STALL_S.get()
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "SSH_ASKPASS": ""}
    if "GIT_SSH_COMMAND" not in env and "GIT_SSH" not in env:
        env["GIT_SSH_COMMAND"] = f"ssh -o BatchMode=yes -o ConnectTimeout={max(1, int(stall))}"
    # curl gives up on its own too when an http(s) transfer crawls below 1 kB/s
    speed = ["-c", "http.lowSpeedLimit=1000", "-c", f"http.lowSpeedTime={max(1, int(stall))}"]
    try:
        proc = subprocess.Popen(
            ["git", *speed, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise GitFailed(f"cannot run git: {exc}") from None
    last = [time.monotonic()]
    out: list[bytes] = []
    err: list[bytes] = []

    def drain(stream: Any, into: list[bytes]) -> None:
        for block in iter(lambda: stream.read1(65536), b""):
            into.append(block)
            last[0] = time.monotonic()

    readers = [
        threading.Thread(target=drain, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=drain, args=(proc.stderr, err), daemon=True),
    ]
    for reader in readers:
        reader.start()
    start = time.monotonic()
    why = ""
    while proc.poll() is None:
        now = time.monotonic()
        if now - last[0] > stall:
            why = f"no answer for {stall:g} s (CTXKERNEL_GIT_STALL_S sets how long)"
        elif now - start > limit_s:
            why = f"still running after {limit_s:g} s"
        if why:
            _kill_group(proc)
            break
        time.sleep(0.1)
    proc.wait()
    for reader in readers:
        reader.join(2)
    stderr = b"".join(err).decode("utf-8", "replace")
    if why:
        raise GitFailed(f"{what}: {why}", stderr, stalled=True)
    if proc.returncode != 0:
        lines = [ln for ln in stderr.replace("\r", "\n").splitlines() if ln.strip()]
        detail = " ".join(" ".join(lines[-2:]).split())[:200] or f"exit status {proc.returncode}"
        raise GitFailed(detail, stderr)
    return b"".join(out).decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _tracked_files(root: Path, repo: object) -> tuple[list[SourceFile], int]:
    import git

    assert isinstance(repo, git.Repo)
    files: list[SourceFile] = []
    skipped = 0
    for line in repo.git.ls_files("-z", "--stage").split("\0"):
        if not line:
            continue
        meta, path = line.split("\t", 1)
        mode = meta.split()[0]
        local = root / path
        if mode == "120000":  # symlink: follow only when it stays inside the root
            if not _inside(local, root):
                skipped += 1
                continue
        elif mode == "160000":  # submodule
            continue
        files.append(SourceFile(path, local))
    return files, skipped


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return path.resolve().is_file()


# --- plain directory -------------------------------------------------------------------


class DirSource(Source):
    """Files under a local directory, as they are now."""

    kind = "dir"

    def __init__(self, corpus: Corpus, directory: Path) -> None:
        super().__init__(corpus)
        self.directory = directory.expanduser().resolve()

    @property
    def origin(self) -> str:
        return str(self.directory)

    def materialize(self, progress: Progress | None = None) -> Snapshot:
        if not self.directory.is_dir():
            raise UserError(f"--source {self.directory}: not a directory")
        files, skipped = _walk(self.directory)
        digest = hashlib.sha1()
        for f in files:
            st = f.local.stat()
            digest.update(f"{f.path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        version = "dir-" + digest.hexdigest()[:12]
        return Snapshot("dir", self.origin, version, "", self.directory, files, skipped)

    def upstream_version(self) -> str | None:
        return self.materialize().version if self.directory.is_dir() else None


def _walk(root: Path) -> tuple[list[SourceFile], int]:
    files: list[SourceFile] = []
    skipped = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(
            d for d in dirnames if d not in (".git", "__pycache__", "node_modules")
        )
        for name in sorted(filenames):
            local = Path(dirpath) / name
            if local.is_symlink() and not _inside(local, root):
                skipped += 1
                continue
            rel = local.relative_to(root).as_posix()
            files.append(SourceFile(rel, local))
    return files, skipped


# --- installed Python package ------------------------------------------------------------


class PackageSource(Source):
    """The files an installed Python distribution carries, mapped onto upstream paths."""

    kind = "pkg"

    def __init__(self, corpus: Corpus, name: str) -> None:
        super().__init__(corpus)
        self.name = name
        spec = corpus.source.package
        if spec and _norm(name) in {_norm(d) for d in spec.distributions}:
            self.spec = spec
        else:
            self.spec = PackageSpec(distributions=(name,))

    @property
    def origin(self) -> str:
        return f"pkg:{self.name}"

    def _distributions(self) -> list[metadata.Distribution]:
        found = []
        for dist_name in self.spec.distributions:
            try:
                found.append(metadata.distribution(dist_name))
            except metadata.PackageNotFoundError:
                if _norm(dist_name) == _norm(self.name):
                    raise UserError(
                        f"--source pkg:{self.name}: package {self.name!r} is not installed in this "
                        f"Python (pip install {self.name}), or pass another --source"
                    ) from None
        return found

    def materialize(self, progress: Progress | None = None) -> Snapshot:
        dists = self._distributions()
        files: list[SourceFile] = []
        seen: set[str] = set()
        root: Path | None = None
        for dist in dists:
            base = Path(str(dist.locate_file(""))).resolve()
            root = root or base
            for entry in dist.files or []:
                raw = PurePosixPath(str(entry))
                if raw.parts and (
                    raw.parts[0] == ".." or raw.parts[0].endswith((".dist-info", ".egg-info"))
                ):
                    continue
                path = str(raw)
                for strip in self.spec.strip:
                    if path.startswith(strip):
                        path = path[len(strip) :]
                        break
                path = self.spec.prefix + path
                if path in seen:
                    continue
                local = Path(str(dist.locate_file(entry)))
                if local.is_symlink() and not _inside(local, base):
                    continue
                seen.add(path)
                files.append(SourceFile(path, local))
        version = self._version(dists)
        first = dists[0].version if dists else ""
        ref = self.spec.version_ref.format(version=first) if first else ""
        return Snapshot(
            "pkg", self.origin, version, ref, root or Path("."), sorted(files, key=lambda f: f.path)
        )

    @staticmethod
    def _version(dists: list[metadata.Distribution]) -> str:
        return ",".join(f"{d.metadata['Name']}=={d.version}" for d in dists)

    def upstream_version(self) -> str | None:
        try:
            return self._version(self._distributions())
        except UserError:
            return None


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


# --- documentation pages ----------------------------------------------------------------


class HttpSource(Source):
    """One documentation page downloaded over HTTP(S), cached with its validators."""

    kind = "http"

    def __init__(self, corpus: Corpus, url: str) -> None:
        super().__init__(corpus)
        self.url = url

    @property
    def origin(self) -> str:
        return self.url

    def _cache(self) -> Path:
        digest = hashlib.sha1(self.url.encode()).hexdigest()[:10]
        return paths.cache_dir() / "downloads" / f"{self.corpus.name}-{digest}"

    def materialize(self, progress: Progress | None = None) -> Snapshot:
        import urllib.error
        import urllib.request

        folder = self._cache()
        folder.mkdir(parents=True, exist_ok=True)
        name = PurePosixPath(self.url.split("?")[0]).name or "index.html"
        target = folder / name
        meta_file = folder / "validators.json"
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() and target.is_file() else {}
        request = urllib.request.Request(self.url, headers={"User-Agent": "ctxkernel"})
        if meta.get("etag"):
            request.add_header("If-None-Match", meta["etag"])
        if meta.get("last_modified"):
            request.add_header("If-Modified-Since", meta["last_modified"])
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                total = int(response.headers.get("Content-Length") or 0)
                tmp = target.with_suffix(target.suffix + ".part")
                done = 0
                with open(tmp, "wb") as out:
                    for block in iter(lambda: response.read(1 << 16), b""):
                        out.write(block)
                        done += len(block)
                        if progress:
                            progress(f"downloading {name}", done, total or done)
                os.replace(tmp, target)
                meta = {
                    "etag": response.headers.get("ETag"),
                    "last_modified": response.headers.get("Last-Modified"),
                }
                meta_file.write_text(json.dumps(meta))
        except urllib.error.HTTPError as exc:
            if exc.code != 304:
                raise UserError(self._unreachable(exc)) from exc
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            if not target.is_file():
                raise UserError(self._unreachable(exc)) from exc
        version = "sha256-" + _file_hash(target)[:12]
        return Snapshot("http", self.origin, version, version, folder, [SourceFile(name, target)])

    def _unreachable(self, exc: Exception) -> str:
        return (
            f"cannot download {self.url}: {exc}; index from a local copy instead with --source "
            "(a saved .html page, a directory, or a git repo with a Markdown conversion)"
        )

    def upstream_version(self) -> str | None:
        import urllib.error
        import urllib.request

        request = urllib.request.Request(
            self.url, method="HEAD", headers={"User-Agent": "ctxkernel"}
        )
        try:
            with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:
                return str(
                    response.headers.get("ETag") or response.headers.get("Last-Modified") or ""
                )
        except (urllib.error.URLError, OSError, TimeoutError):
            return None


class FileSource(Source):
    """A single local file (a saved documentation page)."""

    kind = "file"

    def __init__(self, corpus: Corpus, file: Path) -> None:
        super().__init__(corpus)
        self.file = file.expanduser().resolve()

    @property
    def origin(self) -> str:
        return str(self.file)

    def materialize(self, progress: Progress | None = None) -> Snapshot:
        if not self.file.is_file():
            raise UserError(f"--source {self.file}: no such file")
        version = "sha256-" + _file_hash(self.file)[:12]
        return Snapshot(
            "file",
            self.origin,
            version,
            version,
            self.file.parent,
            [SourceFile(self.file.name, self.file)],
        )

    def upstream_version(self) -> str | None:
        return "sha256-" + _file_hash(self.file)[:12] if self.file.is_file() else None


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- choosing -----------------------------------------------------------------------------


def resolve_source(corpus: Corpus, arg: str | None = None, ref: str = "") -> Source:
    """The Source for ``--source arg`` (or the corpus's default when arg is None)."""
    if not arg:
        spec = corpus.source
        if spec.git:
            return GitSource(corpus, spec.git, ref or spec.ref)
        if spec.url:
            return HttpSource(corpus, spec.url)
        if spec.package:
            return PackageSource(corpus, spec.package.distributions[0])
        raise UserError(f"corpus {corpus.name} has no source; pass --source")
    if arg.startswith("pkg:"):
        name = arg[4:].strip()
        if not name:
            raise UserError("--source pkg: needs a distribution name, e.g. pkg:triton")
        return PackageSource(corpus, name)
    if arg.startswith("dir:"):
        return DirSource(corpus, Path(arg[4:]))
    if arg.startswith(("http://", "https://")):
        if corpus.source.url and not arg.endswith(".git"):
            return HttpSource(corpus, arg)
        return GitSource(corpus, arg, ref)
    if arg.startswith(("git@", "ssh://", "git://", "file://")):
        return GitSource(corpus, arg, ref)
    local = Path(arg).expanduser()
    if local.is_dir():
        return (
            GitSource(corpus, str(local), ref) if _is_git_dir(local) else DirSource(corpus, local)
        )
    if local.is_file():
        return FileSource(corpus, local)
    raise UserError(
        f"--source {arg!r}: not a directory, file, URL or pkg:NAME "
        "(give a git URL, a local git repo or mirror, a directory, or pkg:<distribution>)"
    )


def source_from_record(corpus: Corpus, kind: str, origin: str) -> Source:
    """Rebuild the Source an index was made from (for ``update`` and freshness)."""
    if kind == "git":
        url, _, ref = origin.rpartition("@")
        return GitSource(corpus, url or origin, ref)
    if kind == "pkg":
        return PackageSource(corpus, origin[4:])
    if kind == "http":
        return HttpSource(corpus, origin)
    if kind == "file":
        return FileSource(corpus, Path(origin))
    return DirSource(corpus, Path(origin))


def iter_wanted(corpus: Corpus, snapshot: Snapshot) -> Iterator[SourceFile]:
    for f in snapshot.files:
        if corpus.wants(f.path):
            yield f
