"""The results store: every run appended to one SQLite file (the standard library's sqlite3), with
the git commit it ran at, so a subject's speed can be followed across commits (`cudabench history`)
and any stored run compared with another (`cudabench compare @HEAD~1 @latest`).

A run is kept whole, as the same results document `run --json` writes (so a stored run reads back
exactly like a file), plus one row per result for queries. The schema version is SQLite's
`user_version`; MIGRATIONS bring an older store forward in one transaction, and a store written by a
newer cudabench is refused. Writers take the write lock up front (BEGIN IMMEDIATE) and wait for it
(busy timeout), in WAL mode, so runs on many GPUs or in parallel shells of one host append without
corrupting each other. A store is for one host: SQLite's WAL needs shared memory, which network file
systems (NFS, Lustre) do not give across hosts; a cluster run is appended by the one process that
schedules it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from cudabench.errors import ConfigError
from cudabench.results.export import json_safe

ENV_VAR = "CUDABENCH_STORE"
DEFAULT_NAME = Path(".cudabench") / "results.db"
WAIT_SECONDS = 60.0  # how long a writer waits for another one's transaction

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


def default_path(cwd: Optional[Path] = None) -> Path:
    """$CUDABENCH_STORE, else .cudabench/results.db at the top of the git work tree (or here)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    cwd = cwd or Path.cwd()
    top = _git(["rev-parse", "--show-toplevel"], cwd)
    return Path(top or cwd) / DEFAULT_NAME


@dataclass(frozen=True)
class Provenance:
    """Where the code that ran came from: the work tree's commit and whether it had changes."""

    commit: str
    dirty: bool

    @staticmethod
    def here(cwd: Optional[Path] = None) -> "Provenance":
        cwd = cwd or Path.cwd()
        commit = _git(["rev-parse", "HEAD"], cwd) or ""
        status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
        return Provenance(commit, bool(status))


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


def check_readable(path: Path) -> None:
    """Refuse, before a run starts, a store this cudabench cannot append to (not SQLite, or newer)."""
    if not path.exists():
        return
    try:  # read-only, through a URI escaped as one ('#', '?' and '%' in a name stay in the name)
        with contextlib.closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)) as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise _cannot_use(path, exc) from None
    if version > SCHEMA_VERSION:
        raise _newer(path, version)


class Store:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(self.path, timeout=WAIT_SECONDS, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self._migrate()
        except sqlite3.Error as exc:
            raise _cannot_use(self.path, exc) from None

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
            for version in range(self.version, SCHEMA_VERSION):  # read again inside the lock
                for statement in MIGRATIONS[version]:
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {version + 1}")

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")  # the write lock now, or wait for it
        try:
            yield
        except BaseException:
            if self.db.in_transaction:  # SQLite has already rolled back after e.g. a full disk
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

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
        rows = self.db.execute("SELECT id, created, command, git_commit, git_dirty FROM runs ORDER BY id")
        return [StoredRun(i, created, command, commit, bool(dirty)) for i, created, command, commit, dirty in rows]

    def document(self, run: StoredRun) -> dict[str, Any]:
        (text,) = self.db.execute("SELECT document FROM runs WHERE id = ?", (run.id,)).fetchone()
        return json.loads(text)

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
        commit = (_git(["rev-parse", "--verify", "--quiet", ref + "^{commit}"], cwd or Path.cwd()) or ref).lower()
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


def _cannot_use(path: Path, exc: sqlite3.Error) -> ConfigError:
    if getattr(exc, "sqlite_errorname", "") == "SQLITE_NOTADB" or "not a database" in str(exc):
        return ConfigError(f"{path} is not a cudabench results store ({exc}).",
                           f"Give another path with --store, or set {ENV_VAR}.")
    return ConfigError(f"Cannot use the results store {path}: {exc}.",
                       "Another run may hold it (it waits up to a minute), or the folder is not writable; "
                       f"give another path with --store, or set {ENV_VAR}.")


def _newer(path: Path, version: int) -> ConfigError:
    return ConfigError(f"{path} was written by a newer cudabench (store schema version {version}; this one "
                       f"reads up to {SCHEMA_VERSION}).",
                       "Upgrade cudabench to use it, or give another store with --store.")


def _stats(result: Mapping[str, Any]) -> tuple[Optional[float], Optional[float], Optional[float]]:
    stats = result.get("stats") or {}
    return stats.get("median"), stats.get("ci_low"), stats.get("ci_high")


def _git(args: list[str], cwd: Path) -> Optional[str]:
    """git's stripped output, or None outside a work tree or without git."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
