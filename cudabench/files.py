"""The one place files given by users are read and parsed (standard library only).

Reading takes a regular file (symlinks followed) or `-` for standard input where the caller allows
it, never blocks on a FIFO or a device, and reads at most MAX_INPUT_BYTES ($CUDABENCH_MAX_INPUT_BYTES
raises it). Parsing turns every failure of json and tomllib (syntax, nesting too deep, an integer
past Python's digit limit, text that is not UTF-8) into one ConfigError naming the file and, where
known, the line and column. Outputs are checked and written in cudabench.outputs.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
from typing import Any, Optional, Union

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from cudabench.errors import ConfigError

PathLike = Union[str, os.PathLike]

LIMIT_VAR = "CUDABENCH_MAX_INPUT_BYTES"
MAX_INPUT_BYTES = 256 * 2**20
STDIN = "-"
STDOUT_PATHS = ("-", "/dev/stdout")
_CHUNK = 1 << 20

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symlink"))


def kind_of(mode: int) -> str:
    """What a file mode says a path is, in words: "a folder", "a named pipe (FIFO)", ..."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for is_kind, name in _KINDS if is_kind(mode)), "a special file")


def size_text(count: int) -> str:
    """1536 -> '1.5 KiB'; exact bytes below 1 KiB."""
    value, unit = float(count), "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            break
        value /= 1024
    return f"{count} bytes" if unit == "bytes" else f"{value:.1f} {unit} ({count} bytes)"


# ---- reading --------------------------------------------------------------------------------------

def input_limit() -> int:
    """The most bytes one input file may hold: $CUDABENCH_MAX_INPUT_BYTES, else MAX_INPUT_BYTES."""
    text = os.environ.get(LIMIT_VAR, "").strip()
    if not text:
        return MAX_INPUT_BYTES
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{LIMIT_VAR}={text[:40]} is not a positive whole number of bytes.",
                          f"Set it to e.g. {2 * MAX_INPUT_BYTES} (the default is {MAX_INPUT_BYTES}), or unset it.")
    return int(text)


def read_input(path: PathLike, what: str, allow_stdin: bool = False, missing_hint: str = "") -> bytes:
    """The bytes of the `what` (e.g. "results file") at `path`: a regular file, symlinks followed, or
    `-` for standard input when `allow_stdin`. ConfigError, one paragraph naming the path, for a path
    that does not exist (hint: `missing_hint`), a symlink loop, a folder, a FIFO, a device or a socket,
    or more than input_limit() bytes. Never blocks: the file is opened non-blocking and checked again
    after opening, so a FIFO swapped in meanwhile is refused too."""
    limit = input_limit()
    if allow_stdin and str(path) == STDIN:
        return _read_limited(sys.stdin.buffer, "on standard input", what, limit)
    _require_regular(path, what, _stat(path, what, missing_hint).st_mode, allow_stdin)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise _unreadable(path, what, exc, missing_hint) from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        info = os.fstat(fd)
        _require_regular(path, what, info.st_mode, allow_stdin)
        if info.st_size > limit:
            raise _too_big(path, what, info.st_size, limit)
        return _read_limited(f, path, what, limit)


def read_text(path: PathLike, what: str, allow_stdin: bool = False, missing_hint: str = "") -> str:
    """read_input, decoded as UTF-8 (ConfigError naming the first byte that is not)."""
    return decode(read_input(path, what, allow_stdin, missing_hint), path, what)


def decode(data: bytes, path: PathLike, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start].decode("utf-8", "replace")
        line, column = _place(before, len(before))
        raise ConfigError(f"The {what} {path} is not UTF-8 text: byte {exc.start} (line {line}, column {column}) "
                          f"is 0x{data[exc.start]:02x} ({exc.reason}).",
                          "Save it as UTF-8; is it the file you meant?") from None


def _stat(path: PathLike, what: str, missing_hint: str) -> os.stat_result:
    try:
        return os.stat(path)  # follows symlinks
    except OSError as exc:
        raise _unreadable(path, what, exc, missing_hint) from None
    except ValueError:  # a NUL in the name
        raise ConfigError(f"The {what} path {str(path)!r} contains a NUL character.") from None


def _unreadable(path: PathLike, what: str, exc: OSError, missing_hint: str) -> ConfigError:
    if exc.errno == errno.ENOENT:
        if os.path.islink(path):
            return ConfigError(f"The {what} {path} is a symlink to {os.readlink(path)}, which does not exist.",
                               missing_hint)
        return ConfigError(f"The {what} {path} does not exist.", missing_hint)
    if exc.errno == errno.ELOOP:
        return ConfigError(f"The {what} {path} is a symlink loop (its links never reach a file).",
                           "Point the symlink at a real file, or give the file's own path.")
    if exc.errno == errno.ENOTDIR:
        return ConfigError(f"The {what} {path} cannot exist: a folder on its path is a file.")
    return ConfigError(f"Cannot read the {what} {path}: {exc.strerror or exc}.")


def _require_regular(path: PathLike, what: str, mode: int, allow_stdin: bool) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        hint = "Give the path of a file inside that folder."
    elif allow_stdin:
        hint = "To read a pipe or a device, give - and redirect it to standard input."
    else:
        hint = "To read a pipe or a device, copy what it gives to a file first, and give that file."
    raise ConfigError(f"Cannot read the {what} {path}: it is {kind_of(mode)}, not a regular file.", hint)


def _too_big(path: PathLike, what: str, size: Optional[int], limit: int) -> ConfigError:
    """`size` None: unknown (standard input, a file that grows), only that it passed the limit."""
    holds = f"holds {size_text(size)}" if size is not None else "goes on past that"
    return ConfigError(f"The {what} {path} is too large: an input may hold {size_text(limit)}, and it {holds}.",
                       f"If it really is that large, raise the limit: set {LIMIT_VAR} to a number of bytes.")


def _read_limited(f: Any, path: PathLike, what: str, limit: int) -> bytes:
    """At most `limit` bytes: a file that grows, or a /proc file whose size says 0, is read in chunks."""
    chunks, total = [], 0
    while True:
        try:
            chunk = f.read(min(_CHUNK, limit + 1 - total))
        except OSError as exc:
            raise ConfigError(f"Cannot read the {what} {path}: {exc.strerror or exc}.") from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise _too_big(path, what, None, limit)


# ---- parsing --------------------------------------------------------------------------------------

def parse_json(data: Union[bytes, str], path: PathLike, what: str) -> Any:
    """JSON text -> data; ConfigError naming `path` and the line and column of the mistake."""
    text = decode(data, path, what) if isinstance(data, (bytes, bytearray)) else data
    try:
        doc = json.loads(text)
        _no_lone_surrogates(doc)
        return doc
    except _Surrogate as exc:
        raise _not_parsed(path, what, "JSON", f"the string {exc.args[0]!r} holds a lone surrogate escape "
                          "(\\ud800..\\udfff alone is not text)") from None
    except json.JSONDecodeError as exc:
        raise _not_parsed(path, what, "JSON", f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise _not_parsed(path, what, "JSON", _too_deep(text)) from None
    except ValueError as exc:  # an integer longer than sys.get_int_max_str_digits()
        raise _not_parsed(path, what, "JSON", _long_number(text, r"\d+") or str(exc)) from None
    except Exception as exc:  # whatever else the parser meets: still the file's fault, said in one line
        raise _not_parsed(path, what, "JSON", f"{type(exc).__name__}: {exc}") from None


class _Surrogate(Exception):
    pass


def _no_lone_surrogates(doc: Any) -> None:
    """JSON may escape half of a UTF-16 pair (\\ud800) alone: Python reads it into a str that no
    encoder can write, so printing or saving it later would fail. Refused here, at the file."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _Surrogate(item.encode("utf-8", "backslashreplace").decode()[:60]) from None
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_toml(data: Union[bytes, str], path: PathLike, what: str) -> dict[str, Any]:
    """TOML text -> its table; ConfigError naming `path` and the line and column of the mistake."""
    text = decode(data, path, what) if isinstance(data, (bytes, bytearray)) else data
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _not_parsed(path, what, "TOML", str(exc).rstrip(".")) from None
    except RecursionError:
        raise _not_parsed(path, what, "TOML", _too_deep(text)) from None
    except ValueError as exc:  # an integer longer than sys.get_int_max_str_digits()
        raise _not_parsed(path, what, "TOML", _long_number(text, r"\d[\d_]*") or str(exc)) from None
    except Exception as exc:
        raise _not_parsed(path, what, "TOML", f"{type(exc).__name__}: {exc}") from None


def _not_parsed(path: PathLike, what: str, language: str, why: str) -> ConfigError:
    hint = "Fix the syntax there (https://toml.io)." if language == "TOML" else "Is it the file you meant?"
    return ConfigError(f"The {what} {path} is not valid {language}: {why}.", hint)


def _place(text: str, offset: int) -> tuple[int, int]:
    """(line, column), both from 1, of `offset` in `text`."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _too_deep(text: str) -> str:
    """How deep brackets nest and where the deepest is (counted roughly: brackets in strings count too)."""
    depth, deepest, where = 0, 0, 0
    for offset, char in enumerate(text):
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, offset
        elif char in "]}":
            depth -= 1
    line, column = _place(text, where)
    return (f"lists or tables nest {deepest} deep (the deepest at line {line}, column {column}), "
            "deeper than Python's parser goes")


def _long_number(text: str, pattern: str) -> str:
    """Where the first number longer than Python's integer digit limit is, or ''."""
    most = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if not most:
        return ""
    for match in re.finditer(pattern, text):
        digits = sum(c.isdigit() for c in match.group())
        if digits > most:
            line, column = _place(text, match.start())
            return f"a number of {digits} digits at line {line}, column {column} (at most {most} are read)"
    return ""
