"""A file found as a whole is shown by the part of it that answers: on a small corpus the
test writes (real git repo, real index and embedder), a question that a later section of
a file answers finds that section, and the file's opening, which the whole-file ranking
used to put forward for every question about the file, ranks below it."""

from __future__ import annotations

from ctxkernel import Workspace

from .conftest import dedent

CORPUS = "standin"
FILES = {
    "docs/kernel_cache.md": dedent(
        """
        # Kernel cache

        Compiled kernels are kept in a cache on disk and loaded again by later runs, so a
        program that launches the same kernel twice compiles it once. The cache lives in
        one folder per user and is shared by every process of that user.

        ## Clearing the cache

        Remove the folder, or call clear_cache() from a program, to drop every kernel
        compiled so far; the next launch compiles again.

        ## How the cache key is computed

        Each entry is found by its key: a sha256 hash over the kernel's source text, the
        target architecture, the pass configs and the compile flags. Changing any compile
        flag gives another key, so the old entry is not reused.

        ## Sharing the cache between machines

        Copy the folder; entries built for another architecture are never loaded.
        """
    ),
    "src/launch.py": dedent(
        '''
        """Kernel launch helpers."""


        def launch(kernel, grid, *args):
            """Launch a compiled kernel over the grid with the arguments."""
            return kernel[grid](*args)
        '''
    ),
    "docs/layouts.md": dedent(
        """
        # Layouts

        A layout maps coordinates to offsets; swizzled layouts avoid bank conflicts in
        shared memory.
        """
    ),
}


def test_a_question_finds_the_section_of_the_file_that_answers_it(files_ws: Workspace) -> None:
    hits = files_ws.search("which compile flags go into the cache key", k=5).hits
    ids = [h.id for h in hits]
    doc = [h.chunk for h in hits if h.chunk.path == "docs/kernel_cache.md"]
    assert doc, ids
    assert "How the cache key is computed" in doc[0].title, ids
    assert hits[0].chunk.title == doc[0].title, ids
