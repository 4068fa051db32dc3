"""Progress reporting: library code reports stages through a Progress; the CLI shows
rich progress bars on stderr (only on a TTY and never with --json), tests and tools
pass nothing and get silence."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any


class Task:
    def advance(self, n: int = 1) -> None:
        pass

    def update(
        self,
        *,
        description: str | None = None,
        total: int | None = None,
        completed: int | None = None,
    ) -> None:
        pass

    def done(self) -> None:
        pass


class Progress:
    """Silent by default."""

    def task(self, description: str, total: int | None = None) -> Task:
        return Task()

    def log(self, message: str) -> None:
        pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


class _RichTask(Task):
    def __init__(self, progress: Any, task_id: Any) -> None:
        self._progress = progress
        self._id = task_id

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._id, n)

    def update(
        self,
        *,
        description: str | None = None,
        total: int | None = None,
        completed: int | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {}
        if description is not None:
            kwargs["description"] = description
        if total is not None:
            kwargs["total"] = total
        if completed is not None:
            kwargs["completed"] = completed
        self._progress.update(self._id, **kwargs)

    def done(self) -> None:
        task = self._progress.tasks[[t.id for t in self._progress.tasks].index(self._id)]
        if task.total is None:
            self._progress.update(
                self._id, total=task.completed or 1, completed=task.completed or 1
            )
        else:
            self._progress.update(self._id, completed=task.total)


class RichProgress(Progress):
    """Bars on stderr."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as _P

        self._console = Console(stderr=True)
        self._p = _P(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self._console,
            transient=False,
        )

    def task(self, description: str, total: int | None = None) -> Task:
        return _RichTask(self._p, self._p.add_task(description, total=total))

    def log(self, message: str) -> None:
        self._p.console.print(message)

    def __enter__(self) -> Progress:
        self._p.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._p.stop()


class LineProgress(Progress):
    """Plain stage lines on stderr, for logs (not a TTY) when the user asked for progress."""

    def task(self, description: str, total: int | None = None) -> Task:
        print(
            f"ctxkernel: {description}" + (f" ({total})" if total else ""),
            file=sys.stderr,
            flush=True,
        )
        return Task()

    def log(self, message: str) -> None:
        print(f"ctxkernel: {message}", file=sys.stderr, flush=True)


def for_cli(json_output: bool, quiet: bool = False) -> Progress:
    if json_output or quiet:
        return Progress()
    if sys.stderr.isatty():
        return RichProgress()
    return LineProgress()
