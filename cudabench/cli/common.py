"""What every command shares: the two consoles, the error reporter (the one place a CudabenchError
becomes a message and an exit code), the registry and a few option parsers."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Callable, List, Optional

import typer
from rich.console import Console

from cudabench.errors import ConfigError, CudabenchError

# Piped output (logs, CI) gets a fixed width so tables do not wrap at 80 columns.
_WIDTH = None if sys.stdout.isatty() else 130
out = Console(highlight=False, width=_WIDTH)
err = Console(stderr=True, highlight=False, width=_WIDTH)

KernelsDir = typer.Option(None, "--kernels-dir", help="Extra folder of kernel families (repeatable).")


def report_errors(fn: Callable) -> Callable:
    """Print a CudabenchError as one paragraph (plus its hint) and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CudabenchError as exc:
            err.print(f"[bold red]error:[/] {exc.message}", markup=True, highlight=False)
            if exc.hint:
                err.print(f"[dim]hint:[/] {exc.hint}")
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


def check_writable(path: Optional[Path]) -> None:
    """Fail before measuring, not after the first result, when an output cannot be written."""
    if path is None:
        return
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"Cannot create the folder for {path}: {exc}") from None
    if path.is_dir() or not os.access(folder, os.W_OK):
        raise ConfigError(f"Cannot write {path}.", "Give a file path in a writable folder.")


def fresh_seed(seed: Optional[int]) -> int:
    import random

    return seed if seed is not None else random.SystemRandom().randrange(2**31)
