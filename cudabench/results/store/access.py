"""Whether a path can be a results store, and what SQLite's errors and the file locks say about one:
each problem as one ConfigError that names the store and what to do."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import Optional

from cudabench.errors import ConfigError
from cudabench.files import kind_of
from cudabench.results.store.provenance import git

ENV_VAR = "CUDABENCH_STORE"
DEFAULT_NAME = Path(".cudabench") / "results.db"
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database
WAL_WRITE_LOCK = 120         # the byte of the -shm file a WAL writer locks (SQLite's WALINDEX_LOCK_OFFSET)
RESERVED_BYTE = 0x40000001   # the byte of the database a rollback-journal writer locks
ANOTHER = "another process"  # the lock's holder when /proc/locks does not tell


ELSEWHERE = f"Give another path with --store, or set {ENV_VAR}."


def check_path(path: Path) -> bool:
    """Whether a store is there; ConfigError when the path can never be one: a folder, a device,
    a FIFO, or a file that is not a SQLite database. Reads 16 bytes at most."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False  # a new store (a file on the way is found when its folder is made)
    except OSError as exc:
        raise ConfigError(f"Cannot use the results store {path}: {exc.strerror or exc}.", ELSEWHERE) from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"The results store {path} is a folder; a store is one SQLite file.",
                          f"Give a file path, e.g. --store {path / 'results.db'}, or set {ENV_VAR}.")
    if not stat.S_ISREG(mode):
        raise ConfigError(f"The results store {path} is {kind_of(mode)}, not a file; a store is one SQLite file.",
                          ELSEWHERE)
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise ConfigError(f"Cannot read the results store {path}: {exc.strerror or exc}.", ELSEWHERE) from None
    if head and head != SQLITE_HEADER:  # an empty file is an empty database
        raise ConfigError(f"{path} is not a cudabench results store: it is not a SQLite database "
                          f"(it begins {head!r}).", ELSEWHERE)
    return True


def make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in path.parents if p.exists()), None)
        why = f"{blocker} is a file, not a folder" if blocker and not blocker.is_dir() else exc.strerror or str(exc)
        raise ConfigError(f"Cannot make the folder of the results store {path}: {why}.", ELSEWHERE) from None


def other_tables(db: sqlite3.Connection) -> list[str]:
    return [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]


def not_ours(path: Path, tables: list[str]) -> ConfigError:
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    return ConfigError(f"{path} is not a cudabench results store: it is another program's SQLite database "
                       f"(tables {shown}).", ELSEWHERE)


def busy(exc: sqlite3.Error) -> bool:
    return (getattr(exc, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED")
            or "locked" in str(exc) or "busy" in str(exc))


def cannot_use(path: Path, exc: sqlite3.Error) -> ConfigError:
    """SQLite's error in words that say what is wrong with the store."""
    name, text = getattr(exc, "sqlite_errorname", ""), str(exc)
    if name == "SQLITE_NOTADB" or "not a database" in text:
        return ConfigError(f"{path} is not a cudabench results store: it is not a SQLite database ({text}).",
                           ELSEWHERE)
    if busy(exc):
        return ConfigError(f"The results store {path} is locked: {lock_holder(path)} holds it ({text}).",
                           f"Let that run finish, or give another store with --store (or set {ENV_VAR}).")
    if name == "SQLITE_CORRUPT" or "malformed" in text:
        return ConfigError(f"The results store {path} is damaged ({text}).",
                           f"Move it aside and start a new one (`sqlite3 {path} .recover` may save its runs).")
    if name == "SQLITE_READONLY" or "readonly" in text:
        return ConfigError(f"The results store {path} cannot be written ({text}).",
                           f"Its file or folder is read-only for you; give another path with --store, or set "
                           f"{ENV_VAR}.")
    if name == "SQLITE_CANTOPEN" or "unable to open" in text:
        return ConfigError(f"Cannot open the results store {path} ({text}): its folder is missing or not writable.",
                           ELSEWHERE)
    return ConfigError(f"Cannot use the results store {path}: {text}.", ELSEWHERE)


def lock_holder(path: Path) -> str:
    """Who holds the store's write lock, as /proc/locks (Linux) tells: "process 1234 (cudabench run
    ...)"; ANOTHER where it does not (another OS, another host's lock, a file system it cannot see)."""
    wanted = {}
    for file, byte in ((Path(f"{path}-shm"), WAL_WRITE_LOCK), (path, RESERVED_BYTE)):
        try:
            info = os.stat(file)
        except OSError:
            continue
        wanted[(os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)] = byte
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return ANOTHER
    for line in lines:
        fields = line.split()
        if len(fields) < 8 or "->" in fields or fields[3] != "WRITE":
            continue  # "->": a process waiting for the lock, not holding it
        try:
            major, minor, inode = fields[5].split(":")
            byte = wanted.get((int(major, 16), int(minor, 16), int(inode)))
            if byte is not None and int(fields[6]) <= byte and (fields[7] == "EOF" or byte <= int(fields[7])):
                return _process(int(fields[4]))
        except ValueError:
            continue
    return ANOTHER


def _process(pid: int) -> str:
    if pid == os.getpid():
        return f"this process ({pid}, through another connection)"
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ").split()
    except OSError:
        return f"process {pid}"
    command = " ".join(words)
    return f"process {pid} ({command[:80] + ('...' if len(command) > 80 else '')})" if command else f"process {pid}"


def default_path(cwd: Optional[Path] = None) -> Path:
    """$CUDABENCH_STORE, else .cudabench/results.db at the top of the git work tree (or here)."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    cwd = cwd or Path.cwd()
    top = git(["rev-parse", "--show-toplevel"], cwd)
    return Path(top or cwd) / DEFAULT_NAME
