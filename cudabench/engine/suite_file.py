"""Benchmark suites from TOML files: which kernels, at which shapes (lists and ranges expand into
sweeps), in which directions, against which baselines, with which timing policy.

    name = "timex-ladder"              # optional; default: the file's stem
    description = "..."                # optional
    kernels_dirs = ["../my_kernels"]   # optional; out-of-tree kernel families, relative to this file
    gpus = "all"                       # optional; "all" or GPU indices [0, 2]: one worker per GPU
    cluster = "tcp://head:8786"        # optional; run on this Dask scheduler's GPU=1 workers instead

    [timing]                           # optional; a key left out keeps `cudabench run`'s default
    timing = "sync"                    # sync | events | graph | cupti
    cold = false                       # flush L2 before every timed call
    repeat = 50                        # exactly N samples, or
    min_time = 0.5                     # sample for at least S seconds (not both); else adaptive:
    noise = 0.005                      #   stop once the median is known to ±0.5 % (95 % CI),
    max_time = 2.0                     #   or after this many seconds per subject
    warmup = "100ms"                   # calls (25 or "25") or a duration ("100ms", "0.5s")

    [[case]]                           # one or more
    kernels = ["timex"]                # required: variant or family names
    shape = { B = 32, C = 768, T = 768 }
    directions = ["fwd", "fwdbwd"]     # optional; default: fwd, plus fwdbwd where there is a backward
    baselines = ["conv1d"]             # optional; default: the family's; [] none; "all" every one
    dtypes = ["float32", "bfloat16"]   # optional; default float32; each a case (float16 too)

A shape value is a whole number (768, or a string "1_048_576" or "2^20"), a list of them, or
a range: { from = 64, to = 1024, times = 2 } (64, 128, ..., 1024: geometric) or
{ from = 64, to = 1024, step = 64 } (64, 128, 192, ..., 1024: arithmetic); a range ends at its
last value not above `to`. Zero is for flags (causal = 0); each family checks its own minimums.
A shape expands to the cartesian product of its values. For sizes that move together, `shape` may be a list of tables, expanded in turn:
shape = [{ M = 512, N = 512 }, { M = 1024, N = 1024 }]. No `shape` means the families' defaults.
One shape table expands to at most 10,000 shapes, and the whole suite (every case's shapes) to at
most 100,000: both are counted before anything is expanded, so a slip is refused at once.
`kernels`, `directions` and `baselines` also accept a single string.

Errors name the file, the key (tables and list items counted from 1: case[1].shape.T) and what
was expected. Kernel, baseline and shape parameter names are not resolved here: the run does that.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional, Sequence

from cudabench.errors import ConfigError
from cudabench.files import parse_toml, read_input
from cudabench.results.records.model import DIRECTIONS, TIMINGS
from cudabench.spec.family import DTYPES
from cudabench.spec.shapes import LARGEST, parse_value

MAX_SHAPES = 10_000  # per case: a slip such as step = 1 up to 2^28 should fail, not run for days
MAX_SUITE_SHAPES = 100_000  # over the whole suite (cases × shapes): planning stays a matter of seconds
TOP_KEYS = ("name", "description", "kernels_dirs", "gpus", "cluster", "timing", "case")
CASE_KEYS = ("kernels", "shape", "directions", "baselines", "dtypes")
RANGE_KEYS = ("from", "to", "times", "step")
INT_TEXT = 'a positive integer (e.g. 768, "1_048_576" or "2^20")'
SHAPE_INT_TEXT = 'a whole number (e.g. 768, "1_048_576" or "2^20"; 0 only for flags such as causal)'
VALUE_TEXT = "a whole number (0 only for flags such as causal), a list of them, or a range { from, to, times or step }"
_WARMUP = re.compile(r"^(?P<number>\d{1,12}(?:\.\d{1,12})?)\s*(?P<unit>ms|s)?$")
MAX_SECONDS = 86_400.0        # a day: any time setting beyond it is a slip
MAX_WARMUP_CALLS = 1_000_000
_MISSING = object()


@dataclass(frozen=True)
class TimingPolicy:
    """The [timing] table. None means the file does not set it (the run's default applies)."""

    timing: Optional[str] = None
    cold: Optional[bool] = None
    repeat: Optional[int] = None
    min_time: Optional[float] = None
    noise: Optional[float] = None
    max_time: Optional[float] = None
    warmup: Optional[str] = None
    timeout: Optional[float] = None     # seconds per subject before the watchdog kills its worker

    def given(self) -> dict[str, Any]:
        """Only the settings the file sets, by key."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class CaseSpec:
    """One [[case]]: kernels × expanded shapes × directions, with its baselines."""

    kernels: tuple[str, ...]
    shapes: tuple[dict[str, int], ...]            # ({},) means the families' default shape
    directions: Optional[tuple[str, ...]] = None  # None: the run's default
    baselines: Optional[tuple[str, ...]] = None   # None: the family's default; () none; ("all",) all
    dtypes: Optional[tuple[str, ...]] = None      # None: the run's default (float32)


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    cases: tuple[CaseSpec, ...]
    timing: TimingPolicy
    kernels_dirs: tuple[Path, ...]                # absolute
    path: Path
    gpus: Optional[str] = None                    # "all" or "0,2" (as --gpus takes it)
    cluster: Optional[str] = None                 # a Dask scheduler's address


# ---- errors ------------------------------------------------------------------------------------

SHOWN = 200  # characters of a wrong value quoted in a message


def _show(value: Any) -> str:
    """A wrong value as the file could write it, cut short: a message stays one paragraph."""
    if value is _MISSING:
        return "nothing"
    try:
        text = json.dumps(value, default=str)
    except (RecursionError, ValueError):  # nested thousands deep; an integer past the digit limit
        text = f"a {type(value).__name__} too deep or too long to show"
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def _fail(where: str, expected: str, got: Any = _MISSING, hint: str = "") -> NoReturn:
    raise ConfigError(f"{where}: expected {expected}, got {_show(got)}.", hint)


def _suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"Did you mean '{close[0]}'?" if close else ""


def _check_keys(table: dict[str, Any], allowed: Sequence[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key '{key}'; expected one of {', '.join(allowed)}.",
                              _suggest(key, allowed))


# ---- values ------------------------------------------------------------------------------------

def _positive_int(value: Any, where: str, expected: str = INT_TEXT, least: int = 1) -> int:
    number = value
    if isinstance(value, str):
        try:
            number = parse_value(value)
        except ValueError:
            _fail(where, expected, value)
    if isinstance(number, bool) or not isinstance(number, int) or not least <= number <= LARGEST:
        _fail(where, expected, value)  # at most 2^63, as a --shape value
    return number


def _bounded(value: Any, where: str, kind: type, largest: float, unit: str) -> Any:
    """A positive int (kind int) or number (kind float) up to `largest`."""
    numeric = (int,) if kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, numeric) or value != value:
        _fail(where, f"a positive {'integer' if kind is int else 'number'} ({unit})", value)
    if value <= 0:
        raise ConfigError(f"{where} must be positive (got {value:g}).")
    if value > largest:
        raise ConfigError(f"{where} must be at most {largest:g} {unit} (got {value:g}).")
    return kind(value)


def _boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        _fail(where, "true or false", value)
    return value


def _choice(value: Any, allowed: Sequence[str], where: str) -> str:
    if value not in allowed:
        hint = _suggest(value, allowed) if isinstance(value, str) else ""
        _fail(where, f"one of {', '.join(allowed)}", value, hint)
    return value


def parse_warmup(value: Any, where: str = "--warmup") -> tuple[int, float]:
    """(calls, seconds): '25' (or 25) = 25 calls; '100ms' / '0.5s' = at least that long (and at
    least 3 calls)."""
    text = str(value).strip().lower() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    m = _WARMUP.match(text)
    if not m:
        _fail(where, 'a number of calls (25) or a duration ("100ms", "0.5s")', value)
    if m.group("unit") is None:
        number = float(m.group("number"))
        if not number.is_integer():
            _fail(where, 'a whole number of calls (25) or a duration ("100ms", "0.5s")', value)
        return _bounded(int(number), where, int, MAX_WARMUP_CALLS, "calls"), 0.0
    seconds = float(m.group("number")) / (1e3 if m.group("unit") == "ms" else 1.0)
    return 3, _bounded(seconds, where, float, MAX_SECONDS, "seconds")


def _warmup(value: Any, where: str) -> str:
    parse_warmup(value, where)
    return str(value).strip()


def _names(value: Any, where: str, allowed: Optional[Sequence[str]] = None) -> tuple[str, ...]:
    """A list of non-empty strings (or one string), repeats dropped."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v.strip() for v in items):
        _fail(where, 'a list of names such as ["timex-v4"]', value)
    names = [v.strip() for v in items]
    for i, name in enumerate(names, 1):
        if allowed is not None:
            _choice(name, allowed, f"{where}[{i}]")
    return tuple(dict.fromkeys(names))


# ---- shapes ------------------------------------------------------------------------------------

Axes = dict[str, Sequence[int]]  # one shape table: each parameter's values, in the order written


def _range(table: dict[str, Any], where: str) -> Sequence[int]:
    _check_keys(table, RANGE_KEYS, where)
    start = _positive_int(table.get("from", _MISSING), f"{where}.from")
    stop = _positive_int(table.get("to", _MISSING), f"{where}.to")
    if stop < start:
        _fail(f"{where}.to", f"a value not below from = {start}", stop)
    if ("times" in table) == ("step" in table):
        raise ConfigError(f"{where}: expected exactly one of 'times' (geometric) or 'step' (arithmetic).",
                          "e.g. { from = 64, to = 1024, times = 2 } or { from = 64, to = 1024, step = 64 }")
    if "step" in table:
        step = _positive_int(table["step"], f"{where}.step")
        if (stop - start) // step >= MAX_SHAPES:
            raise ConfigError(f"{where}: expands to more than {MAX_SHAPES} values.", "Use a larger step.")
        return range(start, stop + 1, step)  # lazy: counted before anything is expanded
    factor = _positive_int(table["times"], f"{where}.times")
    if factor < 2:
        _fail(f"{where}.times", "an integer of at least 2", table["times"])
    values = [start]
    while values[-1] * factor <= stop:
        values.append(values[-1] * factor)
    return values


def _values(value: Any, where: str) -> Sequence[int]:
    """One shape parameter's values, in the order written."""
    if isinstance(value, dict):
        return _range(value, where)
    if isinstance(value, list):
        if not value:
            _fail(where, "a non-empty list of positive integers", value)
        return [_positive_int(v, f"{where}[{i}]", SHAPE_INT_TEXT, least=0) for i, v in enumerate(value, 1)]
    return [_positive_int(value, where, VALUE_TEXT, least=0)]


def _axes(table: Any, where: str) -> Axes:
    """One shape table, checked, with its count of shapes checked against MAX_SHAPES; nothing expanded."""
    if not isinstance(table, dict):
        _fail(where, "a table such as { B = 32, T = [64, 128] }", table)
    axes = {name: _values(value, f"{where}.{name}") for name, value in table.items()}
    count = _count([axes])
    if count > MAX_SHAPES:
        raise ConfigError(f"{where}: expands to {count} shapes (at most {MAX_SHAPES}).",
                          "Sweep fewer values, or split the sweep into cases along one parameter each.")
    return axes


def _shape_axes(table: Any, where: str) -> list[Axes]:
    """A `shape` value -> one Axes per table (a list of tables gives each in turn)."""
    if isinstance(table, list):
        if not table:
            _fail(where, "a shape table or a non-empty list of them", table)
        return [_axes(t, f"{where}[{i}]") for i, t in enumerate(table, 1)]
    return [_axes(table, where)]


def _count(tables: Sequence[Axes]) -> int:
    """How many shapes `tables` expand to (repeats included): a product of lengths, nothing built."""
    return sum(math.prod(len(values) for values in axes.values()) for axes in tables)


def _expand(tables: Sequence[Axes]) -> list[dict[str, int]]:
    """Each table's cartesian product in turn, repeats dropped; linear in the shapes made."""
    shapes: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
    for axes in tables:
        names = tuple(axes)
        for combo in itertools.product(*axes.values()):
            key = tuple(zip(names, combo))
            if key not in shapes:
                shapes[key] = dict(key)
    return list(shapes.values())


def expand_shape(table: Any, where: str) -> list[dict[str, int]]:
    """A `shape` value -> its shapes: the cartesian product of each parameter's values (for a list
    of tables, each table's product in turn), repeats dropped. `where` prefixes error messages,
    e.g. "configs/timex.toml: case[1].shape"."""
    return _expand(_shape_axes(table, where))


# ---- tables ------------------------------------------------------------------------------------

def _case(table: Any, where: str) -> tuple[CaseSpec, list[Axes]]:
    """The case with its shapes still to expand (shapes=()), and its shape tables."""
    if not isinstance(table, dict):
        _fail(where, "a [[case]] table", table)
    _check_keys(table, CASE_KEYS, where)
    kernels = _names(table.get("kernels", _MISSING), f"{where}.kernels")
    if not kernels:
        _fail(f"{where}.kernels", 'at least one kernel name, e.g. kernels = ["timex-v4"]', [])
    directions = None
    if "directions" in table:
        directions = _names(table["directions"], f"{where}.directions", DIRECTIONS)
        if not directions:
            _fail(f"{where}.directions", "at least one of fwd, bwd, fwdbwd (or leave the key out)", [])
    baselines = _names(table["baselines"], f"{where}.baselines") if "baselines" in table else None
    dtypes = None
    if "dtypes" in table:
        dtypes = _names(table["dtypes"], f"{where}.dtypes", DTYPES)
        if not dtypes:
            _fail(f"{where}.dtypes", f"at least one of {', '.join(DTYPES)} (or leave the key out)", [])
    axes = _shape_axes(table.get("shape", {}), f"{where}.shape")
    return CaseSpec(kernels, (), directions, baselines, dtypes), axes


def _cases(tables: list[Any], path: Path) -> tuple[CaseSpec, ...]:
    """Every [[case]] checked and counted first, then expanded: a suite past MAX_SUITE_SHAPES is
    refused in the time it takes to read it, not after building millions of shapes."""
    parsed = [_case(c, f"{path}: case[{i}]") for i, c in enumerate(tables, 1)]
    counts = [_count(axes) for _, axes in parsed]
    total = sum(counts)
    if total > MAX_SUITE_SHAPES:
        largest = max(range(len(counts)), key=counts.__getitem__)
        raise ConfigError(f"{path}: the suite expands to {total:,} shapes over its {len(counts)} case(s), more than "
                          f"{MAX_SUITE_SHAPES:,} (case[{largest + 1}] alone has {counts[largest]:,}).",
                          "Sweep fewer values (a larger step or factor), or split the suite into several files.")
    return tuple(replace(spec, shapes=tuple(_expand(axes))) for spec, axes in parsed)


# Each [timing] key's check, shared by suite files and the command line (check_timing).
_TIMING_VALUES: dict[str, Callable[[Any, str], Any]] = {
    "timing": lambda v, where: _choice(v, tuple(TIMINGS), where),
    "cold": _boolean,
    "repeat": lambda v, where: _bounded(v, where, int, 10_000_000, "samples"),
    "min_time": lambda v, where: _bounded(v, where, float, MAX_SECONDS, "seconds"),
    "noise": lambda v, where: _bounded(v, where, float, 1.0, "(half the median's 95 % interval, relative)"),
    "max_time": lambda v, where: _bounded(v, where, float, MAX_SECONDS, "seconds"),
    "warmup": _warmup,
    "timeout": lambda v, where: _bounded(v, where, float, 7 * MAX_SECONDS, "seconds"),
}


def check_timing(policy: TimingPolicy, where: Callable[[str], str]) -> TimingPolicy:
    """Every setting `policy` gives, checked as a suite's [timing] table is; `where(key)` names it in
    messages (e.g. "--min-time" on the command line)."""
    return TimingPolicy(**{key: _TIMING_VALUES[key](value, where(key)) for key, value in policy.given().items()})


def _timing(table: Any, where: str) -> TimingPolicy:
    if not isinstance(table, dict):
        _fail(where, "a [timing] table", table)
    _check_keys(table, tuple(_TIMING_VALUES), where)
    if "repeat" in table and "min_time" in table:
        raise ConfigError(f"{where}: repeat and min_time are alternatives; expected one of them.")
    return check_timing(TimingPolicy(**table), lambda key: f"{where}.{key}")


def _kernels_dirs(value: Any, path: Path) -> tuple[Path, ...]:
    where = f"{path}: kernels_dirs"
    dirs = []
    for i, name in enumerate(_names(value, where), 1):
        folder = (path.parent / name).resolve()
        if not folder.is_dir():
            _fail(f"{where}[{i}]", f"a folder (relative to {path.parent}); {folder} does not exist", name)
        dirs.append(folder)
    return tuple(dirs)


def _text(data: dict[str, Any], key: str, path: Path, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        _fail(f"{path}: {key}", "a string", value)
    return value


def _read_toml(path: Path) -> dict[str, Any]:
    data = read_input(path, "suite file", missing_hint="Shipped suites are in configs/ (e.g. configs/timex.toml).")
    return parse_toml(data, path, "suite file")


def load_suite(path: Path | str) -> Suite:
    """Read and check a suite file; raises ConfigError naming the file, the key and what was expected."""
    path = Path(path)
    data = _read_toml(path)
    _check_keys(data, TOP_KEYS, f"{path}: top level")
    cases = data.get("case", _MISSING)
    if isinstance(cases, dict):
        raise ConfigError(f"{path}: case: expected [[case]] tables (double brackets), got a single [case] table.")
    if not isinstance(cases, list) or not cases:
        _fail(f"{path}: case", "at least one [[case]] table", cases,
              'e.g.\n[[case]]\nkernels = ["timex-v4"]\nshape = { T = [256, 512] }')
    return Suite(
        name=_text(data, "name", path, path.stem),
        description=_text(data, "description", path, ""),
        cases=_cases(cases, path),
        timing=_timing(data.get("timing", {}), f"{path}: timing"),
        kernels_dirs=_kernels_dirs(data.get("kernels_dirs", []), path),
        path=path,
        gpus=_gpus(data.get("gpus", _MISSING), f"{path}: gpus"),
        cluster=_text(data, "cluster", path, "") or None,
    )


def _gpus(value: Any, where: str) -> Optional[str]:
    """"all", or a list of GPU indices, as the text --gpus takes."""
    if value is _MISSING:
        return None
    if value == "all":
        return "all"
    if (isinstance(value, list) and value
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1024 for i in value)):
        return ",".join(str(i) for i in value)
    _fail(where, '"all" or a list of GPU indices (e.g. [0, 2])', value)


def swept_parameters(suite: Suite) -> set[str]:
    """Shape parameters that take more than one value anywhere in the suite."""
    seen: dict[str, set[int]] = {}
    for case in suite.cases:
        for shape in case.shapes:
            for name, value in shape.items():
                seen.setdefault(name, set()).add(value)
    return {name for name, values in seen.items() if len(values) > 1}
