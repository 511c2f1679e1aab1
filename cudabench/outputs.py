"""Where results, reports and plots are written: the checks an output path must pass before any work
(`check_outputs`), and the atomic writers.

Writers follow symlinks and replace the target atomically (a symlink stays a symlink), refuse folders,
devices and FIFOs, and take "-" (or /dev/stdout) for standard output, written directly. A reader never
sees half a file, and an interrupted write leaves no temporary file behind.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from cudabench.errors import ConfigError
from cudabench.files import STDIN, STDOUT_PATHS, PathLike, kind_of

PSEUDO_FILE_SYSTEMS = ("/proc", "/sys")   # the kernel's own files: never a place for results


# ---- checks --------------------------------------------------------------------------------------

def check_outputs(outputs: Iterable[Optional[PathLike]], inputs: Iterable[Optional[PathLike]] = (),
                  make_folders: bool = True) -> None:
    """Before any work: ConfigError, one paragraph each, for an output path that
      - is the same file as one of `inputs` (through symlinks or hard links) or as another output,
      - lies under /proc or /sys, or is not a regular file (a folder, a device such as /dev/null: the
        atomic writers would replace it, a FIFO),
      - cannot be created: its nearest existing folder is a file or cannot be written, or (with
        make_folders=False) its folder does not exist.
    None entries are skipped; `-` and /dev/stdout (standard output) are always accepted, as `-` in
    `inputs` (standard input). Writes nothing: a probe file is made and removed at once."""
    sources = [p for p in inputs if p is not None and str(p) != STDIN]
    seen: list[PathLike] = []
    for output in outputs:
        if output is None or str(output) in STDOUT_PATHS:
            continue
        for source in sources:
            if _same_file(output, source):
                raise ConfigError(f"The output {output} would overwrite the input {source}: they are the same file.",
                                  "Write the output to another path.")
        for other in seen:
            if _same_file(output, other):
                raise ConfigError(f"The outputs {other} and {output} are the same file: one would overwrite the other.",
                                  "Give each output its own path.")
        _check_output(output, make_folders)
        seen.append(output)


def _same_file(a: PathLike, b: PathLike) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links; both must exist
    except (OSError, ValueError):
        return False


def output_target(path: PathLike) -> Path:
    """The regular file that writing `path` replaces: symlinks followed (a symlink to a results file
    stays a symlink); ConfigError for a folder, a device, a FIFO or a socket."""
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return target  # a new file (or the missing target of a dangling symlink); a file on its path is found later
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror or exc}.") from None
    if stat.S_ISREG(mode):
        return target
    raise ConfigError(f"Cannot write {path}: it is {kind_of(mode)}, not a regular file.",
                      "Give the path of a file to create or replace, or - for standard output.")


def _check_output(path: PathLike, make_folders: bool) -> None:
    target = os.path.realpath(path)
    for root in PSEUDO_FILE_SYSTEMS:
        if target == root or target.startswith(root + "/"):
            raise ConfigError(f"Cannot write {path}: it is under {root}, where the kernel shows its own state, "
                              "not a place for files.", "Give a file path in a folder of yours.")
    _check_folder(path, output_target(path).parent, make_folders)


def _check_folder(path: PathLike, folder: Path, make_folders: bool) -> None:
    """The folder `path` goes in can be written, or its nearest existing folder can be (to make it)."""
    if not folder.exists() and not make_folders:
        raise ConfigError(f"Cannot write {path}: the folder {folder} does not exist.", "Create it first.")
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"Cannot write {path}: {folder} is {kind_of(folder.stat().st_mode)}, not a folder.",
                          "Give a file path in a writable folder.")
    try:  # a probe, removed at once: permission bits alone say yes to root, even on a read-only mount
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: the folder {folder} is not writable ({exc.strerror or exc}).",
                          "Give a file path in a writable folder, or - for standard output.") from None


# ---- writing -------------------------------------------------------------------------------------

def writes_to_stdout(path: Optional[Path | str]) -> bool:
    """True for the paths that mean standard output: '-' and /dev/stdout."""
    return path is not None and str(path) in STDOUT_PATHS


def check_output_path(path: Optional[Path | str]) -> None:
    """Fail before any work when `path` can never be written (see check_outputs)."""
    check_outputs([path])


def write_text_atomic(path: Path | str, text: str) -> None:
    """Write UTF-8 text; see write_bytes_atomic."""
    if writes_to_stdout(path):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Write to a temporary file beside the target, then rename over it: readers never see half a
    file. '-' (or /dev/stdout) writes to standard output directly. ConfigError when it cannot."""
    if writes_to_stdout(path):
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    target = output_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror or exc}.", "Give a file path in a writable folder.") from None
    try:
        os.chmod(tmp, _file_mode(target))  # mkstemp makes it private; a results file is an ordinary file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
    except OSError as exc:  # e.g. the disk is full
        Path(tmp).unlink(missing_ok=True)
        raise ConfigError(f"Cannot write {path}: {exc.strerror or exc}.") from None
    except BaseException:   # an interrupt: leave no temporary file behind
        Path(tmp).unlink(missing_ok=True)
        raise


def _file_mode(target: Path) -> int:
    """Keep a replaced file's permissions; a new one gets what the umask allows."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
