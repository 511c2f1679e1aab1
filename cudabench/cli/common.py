"""What every command shares: the two consoles, the error reporter (the one place a CudabenchError
becomes a message and an exit code), the registry and a few option parsers."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Callable, List, Optional

import typer
from rich.console import Console
from rich.text import Text

from cudabench.errors import ConfigError, CudabenchError

# Piped output (logs, CI) gets a fixed width so tables do not wrap at 80 columns. Markup is off on
# both consoles, tables included: names, shapes (add2[n=1024]), paths, compiler and tool output print
# verbatim. Our own styling goes through `say` (or a style= argument), never through markup.
_WIDTH = None if sys.stdout.isatty() else 130
out = Console(highlight=False, markup=False, width=_WIDTH)
err = Console(stderr=True, highlight=False, markup=False, width=_WIDTH)


class Flags:
    """The global options (cudabench --quiet / --traceback COMMAND ...)."""

    quiet = False
    traceback = False


FLAGS = Flags()


def detail(text: str, console: Console = out) -> None:
    """A dim line of context (environment, timing notes, output paths), left out under --quiet."""
    if not FLAGS.quiet:
        console.print(text, style="dim")


def say(*parts: "str | tuple[str, str]", console: Console = out, style: str = "") -> None:
    """Print one line from plain strings and (text, style) pairs, e.g.
    say(("note: ", "yellow"), message, console=err). Nothing in the text is read as markup."""
    console.print(Text.assemble(*parts, style=style))

KernelsDir = typer.Option(None, "--kernels-dir", help="Extra folder of kernel families (repeatable).")


def report_errors(fn: Callable) -> Callable:
    """Print a CudabenchError as one paragraph (plus its hint) and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CudabenchError as exc:
            if FLAGS.traceback:
                cause = getattr(exc, "original", None) or exc
                err.print("".join(traceback.format_exception(type(cause), cause, cause.__traceback__)).rstrip())
            say(("error: ", "bold red"), exc.message, console=err)
            if exc.hint:
                say(("hint: ", "dim"), exc.hint, console=err)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def registry(kernels_dir: Optional[List[Path]] = None):
    from cudabench.spec.registry import discover

    return discover(kernels_dir or [])


def split(values: Optional[List[str]]) -> Optional[tuple[str, ...]]:
    """Repeatable options that also take comma-separated lists."""
    if values is None:
        return None
    return tuple(v.strip() for item in values for v in item.split(",") if v.strip())


def is_stdout(path: Optional[Path]) -> bool:
    """`-` (and /dev/stdout) as an output path means standard output."""
    from cudabench.results.export import writes_to_stdout

    return writes_to_stdout(path)


def check_writable(path: Optional[Path]) -> None:
    """Fail before measuring, not after the first result, when an output cannot be written. Leaves
    nothing behind: missing folders are made when the first result is saved."""
    from cudabench.results.export import check_output_path

    if path is None or is_stdout(path):
        return
    check_output_path(path)  # not a folder, a device, a FIFO
    folder = Path(os.path.realpath(path)).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest folder that exists must let us create the rest
    try:  # a probe, removed at once: permission bits alone say yes to root, even in /proc
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {folder}: {exc.strerror or exc}.",
                          "Give a file path in a writable folder, or - for standard output.") from None


def fresh_seed(seed: Optional[int]) -> int:
    import random

    return seed if seed is not None else random.SystemRandom().randrange(2**31)
