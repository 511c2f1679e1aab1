"""The results store: every run appended to one SQLite file (the standard library's sqlite3), with
the git commit it ran at, so a subject's speed can be followed across commits (`cudabench history`)
and any stored run compared with another (`cudabench compare @HEAD~1 @latest`).

A run is kept whole, as the same results document `run --json` writes (so a stored run reads back
exactly like a file), plus one row per result for queries. The schema version is SQLite's
`user_version`; MIGRATIONS bring an older store forward in one transaction, and a store written by a
newer cudabench is refused. Writers take the write lock up front (BEGIN IMMEDIATE) and wait for it
(busy timeout; after a second they say so, naming the holder), in WAL mode, so runs on many GPUs or
in parallel shells of one host append without corrupting each other. A store is for one host:
SQLite's WAL needs shared memory, which network file systems (NFS, Lustre) do not give across hosts;
a cluster run is appended by the one process that schedules it.

A stored run reads back through the same checks as a results file (export.check_document); a path
that is a folder, a device or not a SQLite database is refused saying which.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional

from cudabench.errors import ConfigError
from cudabench.files import parse_json
from cudabench.results.exporters.json_document import check_document, json_safe, load_results
from cudabench.results.store.provenance import Provenance, git
from cudabench.results.store.access import (ENV_VAR, default_path, busy, cannot_use, check_path, lock_holder, make_folder, not_ours,
                                           other_tables)

WAIT_SECONDS = 60.0   # how long a writer waits for another one's transaction
NOTICE_SECONDS = 1.0  # after this long waiting for a lock, say so (on_wait)

# Version n+1 from version n. Never edit a released step: add one.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: runs kept whole, one row per result
        """CREATE TABLE runs (
               id INTEGER PRIMARY KEY,
               created TEXT NOT NULL,
               command TEXT NOT NULL,
               git_commit TEXT NOT NULL,
               git_dirty INTEGER NOT NULL,
               document TEXT NOT NULL)""",
        """CREATE TABLE results (
               run_id INTEGER NOT NULL REFERENCES runs(id),
               case_key TEXT NOT NULL,
               subject TEXT NOT NULL,
               role TEXT NOT NULL,
               gpu TEXT NOT NULL,
               status TEXT NOT NULL,
               median REAL,
               ci_low REAL,
               ci_high REAL)""",
    ),
    (  # 2: each result's family source hash, and an index for history
        "ALTER TABLE results ADD COLUMN source_hash TEXT NOT NULL DEFAULT ''",
        "CREATE INDEX results_by_subject ON results (subject, case_key, gpu)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass(frozen=True)
class StoredRun:
    id: int
    created: str
    command: str
    commit: str
    dirty: bool

    def label(self) -> str:
        return (self.commit[:10] or "no commit") + ("+dirty" if self.dirty else "")


@dataclass(frozen=True)
class Point:
    """One stored result of a subject: its run, the result as the document holds it, its GPU model."""

    run: StoredRun
    result: Mapping[str, Any]
    gpu: str


def check_readable(path: Path) -> int:
    """Refuse, before a run starts, a store this cudabench cannot append to (a folder, a device, not
    SQLite, another program's database, or newer). Its schema version (0: new or empty), read
    without writing a byte."""
    if not check_path(path):
        return 0
    try:  # read-only, through a URI escaped as one ('#', '?' and '%' in a name stay in the name)
        with contextlib.closing(_read_only(path)) as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            foreign = other_tables(db) if version == 0 else []
    except sqlite3.Error as exc:
        raise cannot_use(path, exc) from None
    if version > SCHEMA_VERSION:
        raise _newer(path, version)
    if foreign:
        raise not_ours(path, foreign)
    return version


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)


def tell_stderr(message: str) -> None:
    """The default on_wait: one line on standard error."""
    print(f"cudabench: {message}", file=sys.stderr, flush=True)


class Store:
    def __init__(self, path: Path | str, on_wait: Callable[[str], None] = tell_stderr, read_only: bool = False):
        """Open (or create) the store at `path`. When another process holds a lock a statement needs,
        `on_wait(message)` is called after NOTICE_SECONDS of waiting for it (message: one line naming
        the holder where /proc/locks tells), and the wait goes on up to WAIT_SECONDS in all.
        `read_only` (history, compare, report): a file that is not a cudabench store of this or an
        older version is refused without a byte written; a current one is opened read-only."""
        self.path = Path(path)
        self.on_wait = on_wait
        version = check_readable(self.path)  # another program's database or a newer store: untouched
        if read_only and version == 0:
            raise ConfigError(f"The store {self.path} holds no runs yet (it is not a cudabench results store).",
                              "Record runs with `cudabench run ... --store`, or name the store with --store PATH.")
        if read_only and version == SCHEMA_VERSION:
            try:
                self.db = _read_only(self.path)
            except sqlite3.Error as exc:
                raise cannot_use(self.path, exc) from None
            return
        make_folder(self.path)
        try:
            self.db = sqlite3.connect(self.path, timeout=WAIT_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise cannot_use(self.path, exc) from None
        try:
            with self._sqlite():
                self._patiently("PRAGMA journal_mode=WAL")
                self._migrate()
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        if self.version > SCHEMA_VERSION:
            raise _newer(self.path, self.version)
        if self.version == SCHEMA_VERSION:
            return
        with self._writing():
            if self.version == 0 and other_tables(self.db):  # another program's database
                raise not_ours(self.path, other_tables(self.db))
            for version in range(self.version, SCHEMA_VERSION):  # read again inside the lock
                for statement in MIGRATIONS[version]:
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {version + 1}")

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        self._patiently("BEGIN IMMEDIATE")  # the write lock now, or wait for it
        try:
            yield
        except BaseException:
            if self.db.in_transaction:  # SQLite has already rolled back after e.g. a full disk
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def _patiently(self, sql: str) -> sqlite3.Cursor:
        """Run `sql`, waiting up to WAIT_SECONDS for a lock another connection holds; after
        NOTICE_SECONDS of that, tell on_wait who holds it. ConfigError when the wait runs out."""
        first = min(NOTICE_SECONDS, WAIT_SECONDS)
        try:
            try:
                self._busy_timeout(first)
                return self.db.execute(sql)
            except sqlite3.OperationalError as exc:
                if not busy(exc):
                    raise
            self.on_wait(f"waiting for the results store {self.path}: {lock_holder(self.path)} holds its lock "
                         f"(up to {WAIT_SECONDS:g} s; Ctrl-C stops).")
            try:
                self._busy_timeout(WAIT_SECONDS - first)
                return self.db.execute(sql)
            except sqlite3.OperationalError as exc:
                if not busy(exc):
                    raise
            raise ConfigError(f"The results store {self.path} is locked: {lock_holder(self.path)} has held its lock "
                              f"for more than {WAIT_SECONDS:g} s.",
                              f"Let that run finish, or give another store with --store (or set {ENV_VAR}).")
        finally:
            self._busy_timeout(WAIT_SECONDS)  # other statements wait as the connection was opened to

    def _busy_timeout(self, seconds: float) -> None:
        self.db.execute(f"PRAGMA busy_timeout = {max(0, int(seconds * 1000))}")

    @contextlib.contextmanager
    def _sqlite(self) -> Iterator[None]:
        """SQLite's errors (a damaged file, a full disk) as one ConfigError naming the store."""
        try:
            yield
        except sqlite3.Error as exc:
            raise cannot_use(self.path, exc) from None

    # ---- writing ---------------------------------------------------------------------------------

    def append(self, doc: Mapping[str, Any], provenance: Provenance, created: str) -> int:
        """Add one run (a results document) and its results; the run's id."""
        hashes = doc.get("source_hashes") or {}
        gpu = (doc.get("environment") or {}).get("gpu", "")
        with self._writing():
            cursor = self.db.execute(
                "INSERT INTO runs (created, command, git_commit, git_dirty, document) VALUES (?, ?, ?, ?, ?)",
                (created, doc.get("command", ""), provenance.commit, int(provenance.dirty),
                 json.dumps(json_safe(doc))))
            run_id = int(cursor.lastrowid)
            self.db.executemany(
                "INSERT INTO results (run_id, case_key, subject, role, gpu, status, median, ci_low, ci_high, "
                "source_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, r["case"]["key"], r["subject"], r["role"], r.get("gpu") or gpu, r["status"],
                  *_stats(r), hashes.get(r["case"]["family"], "")) for r in doc.get("results", ())])
        return run_id

    # ---- reading ---------------------------------------------------------------------------------

    def runs(self) -> list[StoredRun]:
        """Every run, oldest first."""
        with self._sqlite():
            rows = self.db.execute("SELECT id, created, command, git_commit, git_dirty FROM runs ORDER BY id")
            rows = rows.fetchall()
        return [StoredRun(int(i), _text(created), _text(command), _text(commit), bool(dirty))
                for i, created, command, commit, dirty in rows]

    def document(self, run: StoredRun) -> dict[str, Any]:
        """The run's results document, checked and normalised as a results file is (see
        export.check_document); ConfigError naming the store and the run when it is not one."""
        with self._sqlite():
            row = self.db.execute("SELECT document FROM runs WHERE id = ?", (run.id,)).fetchone()
        where = f"{self.path} (run {run.id})"
        try:
            if row is None:
                raise ConfigError(f"{where} is not there (removed meanwhile?).")
            return check_document(parse_json(row[0], where, "stored run"), where)
        except ConfigError as exc:
            raise ConfigError(exc.message, f"Remove that run (sqlite3 {self.path} \"DELETE FROM results WHERE "
                              f"run_id = {run.id}; DELETE FROM runs WHERE id = {run.id}\"), or give another store "
                              f"with --store.") from None

    def points(self) -> Iterator[Point]:
        """Every stored result, oldest run first."""
        for run in self.runs():
            doc = self.document(run)
            gpu = (doc.get("environment") or {}).get("gpu", "")
            for result in doc.get("results", ()):
                yield Point(run, result, result.get("gpu") or gpu)

    def resolve(self, ref: str, cwd: Optional[Path] = None) -> StoredRun:
        """The run a reference names: `latest`, `latest~N` (N runs before it), a commit or its
        prefix, or anything git resolves to a commit (HEAD~1, a branch, a tag): the newest run there."""
        runs = self.runs()
        if not runs:
            raise ConfigError(f"The store {self.path} holds no runs yet.",
                              "Record one with `cudabench run ... --store`.")
        if ref == "latest" or ref.startswith("latest~"):
            back = ref.partition("~")[2] or "0"
            if not back.isdigit() or int(back) >= len(runs):
                raise ConfigError(f"@{ref}: the store {self.path} holds {len(runs)} run(s).",
                                  "Use @latest, @latest~1 (the run before it), ...")
            return runs[-1 - int(back)]
        commit = (git(["rev-parse", "--verify", "--quiet", ref + "^{commit}"], cwd or Path.cwd()) or ref).lower()
        matching = [r for r in runs if len(commit) >= 4 and r.commit.startswith(commit)]
        if not matching:
            known = ", ".join(dict.fromkeys(r.label() for r in reversed(runs)))
            raise ConfigError(f"@{ref}: no run in {self.path} at that commit.",
                              f"Stored commits, newest first: {known}. `cudabench history` shows them.")
        commits = sorted({r.commit for r in matching})
        if len(commits) > 1:
            raise ConfigError(f"@{ref} matches runs at {len(commits)} commits: {', '.join(c[:12] for c in commits)}.",
                              "Give more of the commit.")
        clean = [r for r in matching if not r.dirty]
        return (clean or matching)[-1]  # the commit as committed, unless only changed trees ran there


def _text(value: Any) -> str:
    """A column meant as text, whatever another program stored there."""
    return value if isinstance(value, str) else "" if value is None else str(value)


def _newer(path: Path, version: int) -> ConfigError:
    return ConfigError(f"{path} was written by a newer cudabench (store schema version {version}; this one "
                       f"reads up to {SCHEMA_VERSION}).",
                       "Upgrade cudabench to use it, or give another store with --store.")


def _stats(result: Mapping[str, Any]) -> tuple[Optional[float], Optional[float], Optional[float]]:
    stats = result.get("stats") or {}
    return stats.get("median"), stats.get("ci_low"), stats.get("ci_high")


def append_run(path: Path, doc: Mapping[str, Any]) -> int:
    """Append a finished run, with the git commit of this work tree and the time now, to the store at
    `path` (made if missing); its run id."""
    from datetime import datetime, timezone

    with Store(path) as store:
        return store.append(doc, Provenance.here(), datetime.now(timezone.utc).isoformat(timespec="seconds"))


def load_run(where: str, store: Optional[Path] = None) -> tuple[dict[str, Any], Optional[int]]:
    """A results document from a file, or for `@REF` from the store (`store`, else the default one),
    with its run's id; checked as a results file is."""
    if not where.startswith("@"):
        return load_results(Path(where)), None
    path = Path(store) if store else default_path()
    if not path.exists():
        raise ConfigError(f"{where} names a stored run, but there is no results store at {path}.",
                          "Record runs with `cudabench run ... --store`, or name the store with --store PATH.")
    with Store(path, read_only=True) as opened:
        run = opened.resolve(where[1:])
        return check_document(opened.document(run), Path(f"{path}{where}")), run.id
