"""Refreshing a link table after an index run that wrote or removed a few files: their
links made again against the rest of the table, with those of every file whose links the
change moves (a wrapper defined or gone, its instruction, a helper, a name crossing the
callers' cap), and swapped in; the table is built whole again when the change spreads too
far or touches a Gluon intrinsic's definition.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .make import (
    _ROW_COLUMNS,
    _TOKEN_RE,
    Name,
    Targets,
    _emit,
    _helpers,
    _intrinsic_calls,
    _Links,
    _own,
    _recount,
    _scan,
)
from .mentions import _CODE, _EXAMPLE_KINDS
from .table import ARTIFACT_VERSION, LINKS_FILE, _insert, build

if TYPE_CHECKING:
    from ..corpuscache import CorpusCache


def refresh(cache: CorpusCache, changed: Iterable[str] | None) -> str:
    """Bring the link table up to date after an index run that wrote or removed the files
    ``changed`` (None: unknown). Their links are made again from their chunks and put in
    place of their old ones, with those of every file whose links the change moves (it
    calls, defines or spells a name that was defined or no longer, whose instruction
    changed or that crossed ``USER_NAME_CAP``); the rest of the table stays, since it is
    what a full build would find. The table is built again when a Gluon intrinsic's
    definition changed or the change spreads over more than ``_MAX_SCOPE`` files. Says
    which it did: "kept" (only its stamp moved), "updated" or "built"."""
    path = cache.directory / LINKS_FILE
    generation = cache.get_info("generation") or ""
    if changed is not None and path.exists():
        try:
            done = _apply(cache, path, set(changed), generation)
            if done:
                return done
        except (sqlite3.Error, ValueError, KeyError, TypeError):
            pass  # a damaged table: built again
    build(cache)
    return "built"


# how far a change may spread (files whose links it moves) before the table is built
# again instead: a wrapper header's names reach a few hundred callers at most
_MAX_SCOPE = 400
_MAX_ROUNDS = 6
_MAX_SPELLED = 40  # new names a change may bring before the table is built again instead


def _apply(cache: CorpusCache, path: Path, changed: set[str], generation: str) -> str:
    """Apply a change to these files to the table (a copy, swapped in): "updated", or
    "kept" when the table stays as it is; "" when it must be built again.

    The files whose links are made again start as the changed ones; when that moves what
    a name means (a wrapper defined or gone, its instruction, a helper, a name crossing
    ``USER_NAME_CAP``), the files that call, define or now spell that name join them,
    until no name moved outside them."""
    db = sqlite3.connect(path)
    try:
        info = dict(db.execute("SELECT key, value FROM info").fetchall())
        if info.get("generation") == generation:
            return "kept"
        if info.get("artifact") != ARTIFACT_VERSION:
            return ""
        if _inert(cache, db, info, changed):  # had no part in any link and have none now
            db.execute("UPDATE info SET value=? WHERE key='generation'", (generation,))
            db.commit()
            return "kept"
        old = _read_state(db, info)
        scope = set(changed)
        for _ in range(_MAX_ROUNDS):
            remade = _remake(cache, db, old, scope)
            if remade is None:
                return ""
            made, needed = remade
            if needed <= scope:
                break
            scope |= needed
            if len(scope) > _MAX_SCOPE:
                return ""
        else:
            return ""
        marks = ",".join("?" * len(scope))
        empty = not (
            made.mentions or made.implementers or made.helpers or made.first or made.second
        )
        if empty and not any(
            db.execute(
                f"SELECT 1 FROM {t} WHERE path IN ({marks}) LIMIT 1", sorted(scope)
            ).fetchone()
            for t in ("links", "names", "calls")
        ):  # the files had no part in any link and have none now: only the stamp moves
            db.execute("UPDATE info SET value=? WHERE key='generation'", (generation,))
            db.commit()
            return "kept"
    finally:
        db.close()
    # a name of its own: two readers that find the artifact stale may build it at once
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.copyfile(path, tmp)
    db = sqlite3.connect(tmp)
    try:
        for t in ("links", "names", "calls"):
            db.execute(f"DELETE FROM {t} WHERE path IN ({marks})", sorted(scope))
        _insert(db, made)
        db.execute("UPDATE info SET value=? WHERE key='generation'", (generation,))
        db.commit()
    finally:
        db.close()
    tmp.replace(path)
    return "updated"


def _remake(
    cache: CorpusCache, db: sqlite3.Connection, old: _State, scope: set[str]
) -> tuple[_Links, set[str]] | None:
    """The links of the files in ``scope`` made again against the rest of the table, and
    the files whose links the result would move (``scope`` itself when none outside);
    None when only a whole build can tell (a Gluon intrinsic's definition changed)."""
    cdb = cache.db()
    rows = _rows_of(cache, scope)
    corpus = cache.corpus
    own, implemented, present, intrinsic_paths = _own(rows, corpus)
    if present or intrinsic_paths or scope & old.intrinsic_paths:
        return None  # which intrinsics exist: every file's calls of them
    implementers = _merge(old.implementers, implemented, scope)
    moved = _moved(old.implementers, implementers, implemented, scope)
    first = _scan(rows, corpus, implementers)
    counts, crossed = _recount(_call_counts(db, 1, scope), first)
    firsts = _emit(first, counts, implementers, "call")
    helping = _helpers(firsts, first, implementers)
    helpers = _merge(old.helpers, helping, scope)
    moved_helpers = _moved(old.helpers, helpers, helping, scope)
    second = _scan([r for r in rows if (r[8] or "") in _EXAMPLE_KINDS], corpus, helpers)
    counts2, crossed2 = _recount(_call_counts(db, 2, scope), second)
    made = _Links(
        [
            *own,
            *_intrinsic_calls(rows, corpus, old.present),
            *firsts,
            *_emit(second, counts2, helpers, "call2"),
        ],
        {f"{corpus}:{r[2]}:{r[3]}-{r[4]}": r[2] for r in rows},
        implemented,
        helping,
        old.present,
        old.intrinsic_paths,
        first,
        second,
    )
    spelled = [n for n in moved - set(old.implementers)] + [
        n for n in moved_helpers - set(old.helpers)
    ]
    if len(spelled) > _MAX_SPELLED:
        return None  # many new names: finding who spells each is a whole build's reading
    needed = set(scope) | _reached(db, cdb, moved | moved_helpers, {1: crossed, 2: crossed2})
    for name in moved - set(old.implementers):  # new names: whoever spells them
        needed |= _spelling(cdb, name[1], examples=False)
    for name in moved_helpers - set(old.helpers):
        needed |= _spelling(cdb, name[1], examples=True)
    return made, needed


def _inert(
    cache: CorpusCache, db: sqlite3.Connection, info: dict[str, str], changed: set[str]
) -> bool:
    """The shortcut for most changes (half of cutlass's files make no link): no row of
    the table comes from these files, and their chunks now emit or wrap nothing and
    spell no linked name (of either pass) and no Gluon intrinsic's call -- what
    ``_remake`` would find, without reading the whole state."""
    marks = ",".join("?" * len(changed))
    if not changed or any(
        db.execute(f"SELECT 1 FROM {t} WHERE path IN ({marks}) LIMIT 1", sorted(changed)).fetchone()
        for t in ("links", "names", "calls")
    ):
        return False
    rows = _rows_of(cache, changed)
    if _own(rows, cache.corpus)[0]:
        return False
    if _intrinsic_calls(rows, cache.corpus, set(json.loads(info["present"]))):
        return False
    names = {str(n) for (n,) in db.execute("SELECT DISTINCT name FROM names")}
    code = (r for r in rows if (r[7] or "") in _CODE or (r[7] or "") == "notebook")
    return all(names.isdisjoint(_TOKEN_RE.findall(r[9] or "")) for r in code)


def _rows_of(cache: CorpusCache, paths: set[str]) -> list[tuple[Any, ...]]:
    """The chunk rows (searched, then link-only) of these files, in row order."""
    if not paths:
        return []
    marks = ",".join("?" * len(paths))
    cdb = cache.db()
    rows: list[tuple[Any, ...]] = []
    for table_name in ("chunks", "link_chunks"):
        rows += cdb.execute(
            f"SELECT {_ROW_COLUMNS} FROM {table_name} WHERE path IN ({marks}) ORDER BY row",
            sorted(paths),
        ).fetchall()
    return rows


def _reached(
    db: sqlite3.Connection,
    cdb: sqlite3.Connection,
    moved: set[Name],
    crossed: dict[int, set[Name]],
) -> set[str]:
    """The files whose links the moved names reach: those with an entry for one or a call
    of one, those whose chunks define one (whether a definition is a helper depends on
    whether the name is an implementer), and the callers of a name that crossed the cap.
    One pass over each table, however many names moved (a header of a thousand atoms
    removed moves a thousand)."""
    out: set[str] = set()
    if not moved and not any(crossed.values()):
        return out
    for python, name, path in db.execute("SELECT python, name, path FROM names"):
        if (bool(python), name) in moved:
            out.add(path)
    for stage, python, name, path in db.execute("SELECT pass, python, name, path FROM calls"):
        key = (bool(python), name)
        if key in moved or key in crossed.get(stage, ()):
            out.add(path)
    words = {n for _, n in moved}
    if words:
        for table_name in ("chunks", "link_chunks"):
            for path, defines in cdb.execute(f"SELECT path, defines FROM {table_name}"):
                if defines and not words.isdisjoint(defines.split()):
                    out.add(path)
    return out


def _spelling(cdb: sqlite3.Connection, word: str, *, examples: bool) -> set[str]:
    """The files with a chunk whose text holds ``word`` (examples only: the second pass)."""
    out: set[str] = set()
    for table_name in ("chunks", "link_chunks"):
        query = f"SELECT DISTINCT path FROM {table_name} WHERE instr(text, ?) > 0"
        if examples:
            query += " AND kind IN ('example', 'tutorial')"
        out |= {p for (p,) in cdb.execute(query, (word,))}
    return out


@dataclass
class _State:
    """What a table's links were made through (read back from its artifact)."""

    implementers: Targets
    helpers: Targets
    present: set[str]
    intrinsic_paths: set[str]


def _read_state(db: sqlite3.Connection, info: dict[str, str]) -> _State:
    targets: dict[str, Targets] = {"implementer": {}, "helper": {}}
    for kind, python, name, key, chunk_id, path in db.execute(
        "SELECT kind, python, name, key, chunk_id, path FROM names ORDER BY rowid"
    ):
        targets[kind].setdefault((bool(python), name), []).append((key, chunk_id, path))
    return _State(
        targets["implementer"],
        targets["helper"],
        set(json.loads(info["present"])),
        set(json.loads(info["intrinsic_paths"])),
    )


def _call_counts(
    db: sqlite3.Connection, stage: int, scope: set[str]
) -> dict[Name, tuple[int, int]]:
    """name -> (chunks that call it in pass ``stage``, those of them in ``scope``)."""
    marks = ",".join("?" * len(scope))
    return {
        (bool(python), name): (int(total), int(mine or 0))
        for python, name, total, mine in db.execute(
            f"SELECT python, name, COUNT(*), SUM(path IN ({marks})) FROM calls WHERE pass=?"
            " GROUP BY python, name",
            (*sorted(scope), stage),
        )
    }


def _merge(old: Targets, new: Targets, changed: set[str]) -> Targets:
    """``old`` with the changed files' entries replaced by ``new``'s."""
    out: Targets = {}
    for name, entries in old.items():
        kept = [e for e in entries if e[2] not in changed]
        if kept:
            out[name] = kept
    for name, entries in new.items():
        out.setdefault(name, []).extend(entries)
    return out


def _moved(old: Targets, now: Targets, new: Targets, scope: set[str]) -> set[Name]:
    """The names a call of which resolves otherwise now (``_disambiguate`` reads the keys
    and paths of a name's entries): only names the files in ``scope`` had or have entries
    for can have moved."""
    names = set(new) | {n for n, entries in old.items() if any(e[2] in scope for e in entries)}
    return {
        n
        for n in names
        if {(k, p) for k, _, p in old.get(n, ())} != {(k, p) for k, _, p in now.get(n, ())}
    }
