"""Finds kernel families (folders with a spec.py defining FAMILY) and resolves names to variants.

Importing a spec imports torch but never touches CUDA.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import os
import re
import signal
import sys
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from cudabench.errors import ConfigError, UnknownKernelError
from cudabench.spec.family import Family, Variant


def builtin_kernels_dir() -> Path:
    """kernels/ beside the package in a checkout (or editable install), else the installed copy."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "kernels", package / "kernels"):
        if candidate.is_dir():
            return candidate
    return package.parent / "kernels"


@dataclass(frozen=True)
class Registry:
    families: tuple[Family, ...]

    def family(self, name: str) -> Family:
        for f in self.families:
            if f.name == name:
                return f
        raise self._unknown(name)

    def variants(self) -> list[tuple[Family, Variant]]:
        return [(f, v) for f in self.families for v in f.variants]

    def names(self) -> list[str]:
        return [f.name for f in self.families] + [v.name for _, v in self.variants()]

    def resolve(self, names: Sequence[str]) -> list[tuple[Family, Variant]]:
        """Variant names or family names (a family stands for all its variants), in order, no repeats."""
        picked: list[tuple[Family, Variant]] = []
        for name in names:
            matches = [(f, v) for f, v in self.variants() if v.name == name or f.name == name]
            if not matches:
                raise self._unknown(name)
            picked += [m for m in matches if m not in picked]
        return picked

    def _unknown(self, name: str) -> UnknownKernelError:
        names = list(dict.fromkeys(self.names()))  # a family may share its name with a variant (add2)
        close = difflib.get_close_matches(name, names, n=4, cutoff=0.5)
        hint = f"Did you mean: {', '.join(close)}?" if close else ""
        hint += (" " if hint else "") + "`cudabench list` shows every kernel."
        return UnknownKernelError(f"Unknown kernel '{name}'.", hint)


# Called with (spec file, loaded) before and after each spec.py is imported (cli.supervise names the
# file a process died in)
LOAD_HOOKS: list[Callable[[Path, bool], None]] = []


class SpecExited(BaseException):
    """os._exit called while a spec.py was being imported (raised instead of ending the process)."""

    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def exits_raise() -> Iterator[None]:
    """While a spec.py is imported, os._exit raises SpecExited (sys.exit already raises SystemExit), so
    the error names the file and line. A reference to os._exit taken meanwhile ends the process as
    usual once the import is over."""
    real = os._exit
    loading = [True]

    def guarded(code: int) -> None:
        if loading[0]:
            raise SpecExited(code)
        real(code)

    os._exit = guarded
    try:
        yield
    finally:
        loading[0] = False
        os._exit = real


@contextlib.contextmanager
def ctrl_c_noted(seen: list) -> Iterator[None]:
    """While a spec.py is imported, a real SIGINT is noted in `seen` (then raises KeyboardInterrupt
    as usual), so a KeyboardInterrupt the spec raises itself can be told from a Ctrl-C."""
    def on_sigint(number: int, frame: object) -> None:
        seen.append(True)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: signals go elsewhere, so nothing to tell apart
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def load_family(folder: Path) -> Family:
    spec_file = folder / "spec.py"
    module_name = f"cudabench_kernels_{folder.name.replace('-', '_')}_{abs(hash(str(folder)))}"
    module_spec = importlib.util.spec_from_file_location(module_name, spec_file)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f"Cannot load {spec_file}.")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module
    for hook in LOAD_HOOKS:
        hook(spec_file, False)
    ctrl_c: list[bool] = []
    try:
        with exits_raise(), ctrl_c_noted(ctrl_c):
            module_spec.loader.exec_module(module)
    except KeyboardInterrupt as exc:
        if ctrl_c:
            raise  # a real Ctrl-C while loading: the command stops as on any Ctrl-C
        raise ConfigError(f"{where_raised(exc, spec_file)} failed to load: it raised KeyboardInterrupt itself "
                          "(no Ctrl-C was pressed).", "Fix the kernel family's spec.py.") from None
    except (SystemExit, SpecExited) as exc:  # sys.exit or os._exit while loading: never a silent end
        code = exc.code
        raise ConfigError(f"{where_raised(exc, spec_file)} ended the process while loading (exit code {code!r}): "
                          "a kernel family's spec.py must define FAMILY and return.",
                          "Remove the exit from spec.py (or from what it imports).") from None
    except BaseException as exc:  # a user's spec.py with a bug (any exception class): say which file and line
        error = ConfigError(f"{where_raised(exc, spec_file)} failed to load: {type(exc).__name__}: {printable(exc)}",
                            "Fix the kernel family's spec.py (`cudabench --traceback ...` shows the whole "
                            "traceback).")
        error.original = exc
        raise error from exc
    for hook in LOAD_HOOKS:
        hook(spec_file, True)
    family = getattr(module, "FAMILY", None)
    if not isinstance(family, Family):
        raise ConfigError(f"{spec_file} does not define FAMILY = cudabench.spec.family.Family(...).")
    for what, name in [("family", family.name), *(("variant", v.name) for v in family.variants),
                       *(("baseline", b.name) for b in family.baselines)]:
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ConfigError(f"{spec_file}: the {what} name {printable(name)!s:.80} is not a name: letters, digits, "
                              "'_', '-' and '.' only, starting with a letter or digit (it becomes part of paths "
                              "and command lines).")
    return replace(family, folder=folder)


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def printable(value: object) -> str:
    """str(value), or what it is when its __str__ fails."""
    try:
        return str(value)
    except Exception:
        return f"<{type(value).__name__} that cannot be printed>"


def where_raised(exc: BaseException, spec_file: Path) -> str:
    """'spec.py:LINE' of the deepest frame in the spec file (or the line a SyntaxError names)."""
    if isinstance(exc, SyntaxError) and exc.filename == str(spec_file) and exc.lineno:
        return f"{spec_file}:{exc.lineno}"
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(spec_file)]
    return f"{spec_file}:{lines[-1]}" if lines else str(spec_file)


def spec_call(family: Family, name: str, function: Callable, *args: object) -> object:
    """`function(*args)`, a function of the family's spec.py (its `work`, `reduction`, ...): what it raises
    becomes one paragraph naming the function and the line, not a bare "KeyError: 'T'" from the worker."""
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001 - the spec's own bug, whatever it is
        raise ConfigError(f"{where_raised(exc, family.folder / 'spec.py')}: `{name}` (family {family.name}) "
                          f"raised {type(exc).__name__}: {printable(exc)}",
                          "It is called with the case's parameters (a dict of the shape's names) and its "
                          "direction.") from None


def discover(extra_dirs: Iterable[Path] = ()) -> Registry:
    """All families in the built-in kernels/ folder plus any extra kernel directories."""
    families: list[Family] = []
    for root in [builtin_kernels_dir(), *map(Path, extra_dirs)]:
        if not root.is_dir():
            raise ConfigError(f"Kernel directory {root} {'is not a folder' if root.exists() else 'does not exist'}.")
        if (root / "spec.py").is_file():
            raise ConfigError(f"Kernel directory {root} is a family's own folder (it holds spec.py).",
                              f"Give the folder above it: --kernels-dir {root.parent}")
        folders = sorted(p for p in root.iterdir() if (p / "spec.py").is_file())
        if not folders and root != builtin_kernels_dir():
            raise ConfigError(f"Kernel directory {root} holds no family (no subfolder with a spec.py).",
                              "A kernels folder holds one subfolder per family: NAME/spec.py beside its sources.")
        for folder in folders:
            family = load_family(folder)
            taken = {n for f in families for n in [f.name, *(v.name for v in f.variants)]}
            clash = taken & {family.name, *(v.name for v in family.variants)}
            if clash:
                raise ConfigError(f"{folder}: name(s) {', '.join(sorted(clash))} already registered.")
            families.append(family)
    return Registry(tuple(families))
