"""The lines chunker: fixed windows, blank windows dropped, the fallback for the rest."""

from __future__ import annotations

from collections.abc import Callable

from ctxkernel.chunkers import MAX_CHUNK_CHARS, lines

Check = Callable[..., None]  # the `check` fixture from conftest.py


def test_windows_of_max_lines_with_a_shorter_last_one(check: Check) -> None:
    text = "\n".join(f"line {i}" for i in range(1, 11)) + "\n"
    pieces = lines.chunk(text, "notes.txt", 4)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 4), (5, 8), (9, 10)]
    assert pieces[0].title == "line 1"
    assert pieces[2].body(text.splitlines()) == "line 9\nline 10"
    check(text, pieces)


def test_blank_only_windows_are_dropped(check: Check) -> None:
    text = "a\nb\n\n\n  \n\t\nc\n"
    pieces = lines.chunk(text, "x.txt", 2)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 2), (7, 7)]
    check(text, pieces)


def test_empty_and_whitespace_only_files_give_nothing() -> None:
    assert lines.chunk("", "x", 10) == []
    assert lines.chunk(" \n\t\n\n", "x", 10) == []


def test_a_minified_line_is_truncated_to_the_char_limit(check: Check) -> None:
    text = "short\n" + "x" * (MAX_CHUNK_CHARS * 2) + "\nafter\n"
    pieces = lines.chunk(text, "bundle.js", 120)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 1), (2, 2), (3, 3)]
    assert pieces[1].text == "x" * MAX_CHUNK_CHARS
    check(text, pieces)


def test_windows_are_split_further_to_fit_the_char_limit(check: Check) -> None:
    row = "y" * 5000
    text = "\n".join([row] * 6)
    pieces = lines.chunk(text, "data.csv", 120)
    assert [(p.start_line, p.end_line) for p in pieces] == [(1, 2), (3, 4), (5, 6)]
    check(text, pieces)
