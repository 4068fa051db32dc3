"""Sources: git (URL, repo, bare mirror), directories, installed packages, HTTP pages."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import git
import pytest

from ctxkernel.corpus import get_corpus
from ctxkernel.errors import UserError
from ctxkernel.sources import (
    DirSource,
    FileSource,
    GitSource,
    HttpSource,
    PackageSource,
    iter_wanted,
    resolve_source,
)

from .conftest import Repo


def test_git_source_clones_shallow_and_records_commit(
    demo_corpus: str, upstream: Repo, isolated_home: Path
) -> None:
    corpus = get_corpus(demo_corpus)
    source = resolve_source(corpus, None)
    assert isinstance(source, GitSource)
    snap = source.materialize()
    assert snap.version == upstream.repo.head.commit.hexsha
    assert snap.root.is_relative_to(isolated_home / "cache" / "clones")  # clones live in the cache
    paths = {f.path for f in iter_wanted(corpus, snap)}
    assert paths == {"src/kernels.py", "include/copy.hpp", "docs/guide.md"}
    assert git.Repo(snap.root).git.rev_parse("--is-shallow-repository") == "true"
    # a new upstream commit is picked up by materialising again
    upstream.write("src/new.py", "def added():\n    return 2\n")
    sha2 = upstream.commit("add")
    assert source.materialize().version == sha2
    assert source.upstream_version() == sha2


def test_bare_mirror_is_a_git_source(demo_corpus: str, upstream: Repo, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror.git"
    git.Repo.clone_from(str(upstream.path), str(mirror), mirror=True)
    source = resolve_source(get_corpus(demo_corpus), str(mirror))
    assert isinstance(source, GitSource)
    assert source.materialize().version == upstream.repo.head.commit.hexsha


def test_unreachable_git_upstream_names_source_option(demo_corpus: str, tmp_path: Path) -> None:
    source = GitSource(get_corpus(demo_corpus), (tmp_path / "missing.git").as_uri(), "main")
    with pytest.raises(UserError, match="--source"):
        source.materialize()


def test_plain_directory_and_escaping_symlinks(demo_corpus: str, tmp_path: Path) -> None:
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("def a():\n    return 1\n")
    outside = tmp_path / "secret.py"
    outside.write_text("SECRET = 1\n")
    os.symlink(outside, root / "src" / "leak.py")
    os.symlink(root / "src" / "a.py", root / "src" / "alias.py")  # stays inside: followed
    source = resolve_source(get_corpus(demo_corpus), str(root))
    assert isinstance(source, DirSource)
    snap = source.materialize()
    assert {f.path for f in snap.files} == {"src/a.py", "src/alias.py"}
    assert snap.skipped_links == 1
    before = snap.version
    (root / "src" / "a.py").write_text("def a():\n    return 2\n")
    os.utime(root / "src" / "a.py", ns=(1, 1))
    assert source.materialize().version != before


def test_pkg_source_maps_installed_triton_onto_upstream_paths() -> None:
    corpus = get_corpus("triton")
    source = resolve_source(corpus, "pkg:triton")
    assert isinstance(source, PackageSource)
    snap = source.materialize()
    paths = {f.path for f in iter_wanted(corpus, snap)}
    assert "python/triton/testing.py" in paths
    assert "python/triton/language/core.py" in paths
    assert snap.version.startswith("triton==")
    assert snap.ref.startswith("v")
    local = {f.path: f.local for f in snap.files}["python/triton/testing.py"]
    assert "def do_bench" in local.read_text()


def test_pkg_source_missing_package_is_a_user_error() -> None:
    with pytest.raises(UserError, match="not installed"):
        resolve_source(get_corpus("triton"), "pkg:surely-not-installed-xyz").materialize()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()
    (root / "index.html").write_text("<html><body><h1>PTX</h1></body></html>\n")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a: object, **kw: object) -> None:
            super().__init__(*a, directory=str(root), **kw)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html", root
    server.shutdown()


def test_http_source_downloads_and_caches(
    http_server: tuple[str, Path], isolated_home: Path
) -> None:
    url, root = http_server
    source = resolve_source(get_corpus("ptx"), url)
    assert isinstance(source, HttpSource)
    snap = source.materialize()
    assert snap.files[0].local.read_text().startswith("<html>")
    assert snap.files[0].local.is_relative_to(isolated_home / "cache")
    first = snap.version
    assert source.materialize().version == first  # 304 Not Modified: the cached copy serves
    page = root / "index.html"
    page.write_text("<html><body><h1>PTX 2</h1></body></html>\n")
    later = page.stat().st_mtime + 10  # Last-Modified has one-second resolution
    os.utime(page, (later, later))
    assert source.materialize().version != first


def test_http_unreachable_names_source_option() -> None:
    source = HttpSource(get_corpus("ptx"), "http://127.0.0.1:9/none.html")
    with pytest.raises(UserError, match="--source"):
        source.materialize()


def test_local_file_source(tmp_path: Path) -> None:
    page = tmp_path / "ptx.html"
    page.write_text("<html></html>")
    source = resolve_source(get_corpus("ptx"), str(page))
    assert isinstance(source, FileSource)
    assert [f.path for f in source.materialize().files] == ["ptx.html"]


def test_bad_source_argument(demo_corpus: str) -> None:
    with pytest.raises(UserError, match="not a directory, file, URL or pkg:NAME"):
        resolve_source(get_corpus(demo_corpus), "/definitely/not/here")
