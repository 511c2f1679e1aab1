"""What every command shares: the two consoles, the error reporter (the one place a CudabenchError
becomes a message and an exit code), the registry and a few option parsers."""

from __future__ import annotations

import functools
import sys
import traceback
from pathlib import Path
from typing import Callable, List, Optional

import typer
from rich.console import Console
from rich.text import Text

from cudabench.console import PlainConsole, piped_width, visible
from cudabench.errors import CudabenchError

_WIDTH = None if sys.stdout.isatty() else piped_width()
out = PlainConsole(highlight=False, markup=False, width=_WIDTH)
err = PlainConsole(stderr=True, highlight=False, markup=False, width=_WIDTH)


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
    say(("note: ", "yellow"), message, console=err). Nothing in the text is read as markup or
    reaches the terminal as a control character."""
    # soft_wrap: no line break is inserted, so a command in a hint stays whole when copied
    console.print(Text.assemble(*(visible(p) if isinstance(p, str) else (visible(p[0]), p[1]) for p in parts),
                                style=style), soft_wrap=True)

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


def click_error(exc: BaseException) -> bool:
    """One of click's own errors (a usage error, a bad value), from whichever copy of click typer carries:
    known by its shape, not its class."""
    return hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int)


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
    from cudabench.outputs import writes_to_stdout

    return writes_to_stdout(path)


def check_writable(path: Optional[Path]) -> None:
    """Fail before measuring, not after the first result, when an output cannot be written. Leaves
    nothing behind: missing folders are made when the first result is saved."""
    from cudabench.outputs import check_outputs

    check_outputs([path])


def fresh_seed(seed: Optional[int]) -> int:
    import random

    return seed if seed is not None else random.SystemRandom().randrange(2**31)
