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

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Optional

from cudabench.errors import ConfigError
from cudabench.files import parse_toml, read_input
from cudabench.results.records.model import DIRECTIONS, TIMINGS
from cudabench.spec.family import DTYPES
from cudabench.engine.suite_shapes import Axes, count_shapes, expand_axes, shape_axes
from cudabench.engine.suite_values import MAX_SECONDS, MISSING, boolean, bounded, check_keys, choice, fail, names, warmup_text

MAX_SUITE_SHAPES = 100_000  # over the whole suite (cases × shapes): planning stays a matter of seconds
TOP_KEYS = ("name", "description", "kernels_dirs", "gpus", "cluster", "timing", "case")
CASE_KEYS = ("kernels", "shape", "directions", "baselines", "dtypes")


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


# ---- tables ------------------------------------------------------------------------------------

def _case(table: Any, where: str) -> tuple[CaseSpec, list[Axes]]:
    """The case with its shapes still to expand (shapes=()), and its shape tables."""
    if not isinstance(table, dict):
        fail(where, "a [[case]] table", table)
    check_keys(table, CASE_KEYS, where)
    kernels = names(table.get("kernels", MISSING), f"{where}.kernels")
    if not kernels:
        fail(f"{where}.kernels", 'at least one kernel name, e.g. kernels = ["timex-v4"]', [])
    directions = None
    if "directions" in table:
        directions = names(table["directions"], f"{where}.directions", DIRECTIONS)
        if not directions:
            fail(f"{where}.directions", "at least one of fwd, bwd, fwdbwd (or leave the key out)", [])
    baselines = names(table["baselines"], f"{where}.baselines") if "baselines" in table else None
    dtypes = None
    if "dtypes" in table:
        dtypes = names(table["dtypes"], f"{where}.dtypes", DTYPES)
        if not dtypes:
            fail(f"{where}.dtypes", f"at least one of {', '.join(DTYPES)} (or leave the key out)", [])
    axes = shape_axes(table.get("shape", {}), f"{where}.shape")
    return CaseSpec(kernels, (), directions, baselines, dtypes), axes


def _cases(tables: list[Any], path: Path) -> tuple[CaseSpec, ...]:
    """Every [[case]] checked and counted first, then expanded: a suite past MAX_SUITE_SHAPES is
    refused in the time it takes to read it, not after building millions of shapes."""
    parsed = [_case(c, f"{path}: case[{i}]") for i, c in enumerate(tables, 1)]
    counts = [count_shapes(axes) for _, axes in parsed]
    total = sum(counts)
    if total > MAX_SUITE_SHAPES:
        largest = max(range(len(counts)), key=counts.__getitem__)
        raise ConfigError(f"{path}: the suite expands to {total:,} shapes over its {len(counts)} case(s), more than "
                          f"{MAX_SUITE_SHAPES:,} (case[{largest + 1}] alone has {counts[largest]:,}).",
                          "Sweep fewer values (a larger step or factor), or split the suite into several files.")
    return tuple(replace(spec, shapes=tuple(expand_axes(axes))) for spec, axes in parsed)


# Each [timing] key's check, shared by suite files and the command line (check_timing).
_TIMING_VALUES: dict[str, Callable[[Any, str], Any]] = {
    "timing": lambda v, where: choice(v, tuple(TIMINGS), where),
    "cold": boolean,
    "repeat": lambda v, where: bounded(v, where, int, 10_000_000, "samples"),
    "min_time": lambda v, where: bounded(v, where, float, MAX_SECONDS, "seconds"),
    "noise": lambda v, where: bounded(v, where, float, 1.0, "as a fraction of the median: half its 95 % interval"),
    "max_time": lambda v, where: bounded(v, where, float, MAX_SECONDS, "seconds"),
    "warmup": warmup_text,
    "timeout": lambda v, where: bounded(v, where, float, 7 * MAX_SECONDS, "seconds"),
}


def check_timing(policy: TimingPolicy, where: Callable[[str], str]) -> TimingPolicy:
    """Every setting `policy` gives, checked as a suite's [timing] table is; `where(key)` names it in
    messages (e.g. "--min-time" on the command line)."""
    return TimingPolicy(**{key: _TIMING_VALUES[key](value, where(key)) for key, value in policy.given().items()})


def _timing(table: Any, where: str) -> TimingPolicy:
    if not isinstance(table, dict):
        fail(where, "a [timing] table", table)
    check_keys(table, tuple(_TIMING_VALUES), where)
    if "repeat" in table and "min_time" in table:
        raise ConfigError(f"{where}: repeat and min_time are alternatives; expected one of them.")
    return check_timing(TimingPolicy(**table), lambda key: f"{where}.{key}")


def _kernels_dirs(value: Any, path: Path) -> tuple[Path, ...]:
    where = f"{path}: kernels_dirs"
    dirs = []
    for i, name in enumerate(names(value, where), 1):
        folder = (path.parent / name).resolve()
        if not folder.is_dir():
            fail(f"{where}[{i}]", f"a folder (relative to {path.parent}); {folder} does not exist", name)
        dirs.append(folder)
    return tuple(dirs)


def _text(data: dict[str, Any], key: str, path: Path, default: str) -> str:
    value = data.get(key, default)
    if not isinstance(value, str):
        fail(f"{path}: {key}", "a string", value)
    return value


def _read_toml(path: Path) -> dict[str, Any]:
    data = read_input(path, "suite file", missing_hint="Shipped suites are in configs/ (e.g. configs/timex.toml).")
    return parse_toml(data, path, "suite file")


def load_suite(path: Path | str) -> Suite:
    """Read and check a suite file; raises ConfigError naming the file, the key and what was expected."""
    path = Path(path)
    data = _read_toml(path)
    check_keys(data, TOP_KEYS, f"{path}: top level")
    cases = data.get("case", MISSING)
    if isinstance(cases, dict):
        raise ConfigError(f"{path}: case: expected [[case]] tables (double brackets), got a single [case] table.")
    if not isinstance(cases, list) or not cases:
        fail(f"{path}: case", "at least one [[case]] table", cases,
              'e.g.\n[[case]]\nkernels = ["timex-v4"]\nshape = { T = [256, 512] }')
    return Suite(
        name=_text(data, "name", path, path.stem),
        description=_text(data, "description", path, ""),
        cases=_cases(cases, path),
        timing=_timing(data.get("timing", {}), f"{path}: timing"),
        kernels_dirs=_kernels_dirs(data.get("kernels_dirs", []), path),
        path=path,
        gpus=_gpus(data.get("gpus", MISSING), f"{path}: gpus"),
        cluster=_text(data, "cluster", path, "") or None,
    )


def _gpus(value: Any, where: str) -> Optional[str]:
    """"all", or a list of GPU indices, as the text --gpus takes."""
    if value is MISSING:
        return None
    if value == "all":
        return "all"
    if (isinstance(value, list) and value
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1024 for i in value)):
        return ",".join(str(i) for i in value)
    fail(where, '"all" or a list of GPU indices (e.g. [0, 2])', value)


def swept_parameters(suite: Suite) -> set[str]:
    """Shape parameters that take more than one value anywhere in the suite."""
    seen: dict[str, set[int]] = {}
    for case in suite.cases:
        for shape in case.shapes:
            for name, value in shape.items():
                seen.setdefault(name, set()).add(value)
    return {name for name, values in seen.items() if len(values) > 1}
