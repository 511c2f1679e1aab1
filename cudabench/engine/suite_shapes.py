"""A suite file's `shape` values: whole numbers, lists and ranges, expanded into shapes (the
cartesian product of each table, tables in turn), counted before anything is built."""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

from cudabench.errors import ConfigError
from cudabench.engine.suite_values import MISSING, check_keys, fail, positive_int

MAX_SHAPES = 10_000  # per case: a slip such as step = 1 up to 2^28 should fail, not run for days
RANGE_KEYS = ("from", "to", "times", "step")
SHAPE_INT_TEXT = 'a whole number (e.g. 768, "1_048_576" or "2^20"; 0 only for flags such as causal)'
VALUE_TEXT = "a whole number (0 only for flags such as causal), a list of them, or a range { from, to, times or step }"

Axes = dict[str, Sequence[int]]  # one shape table: each parameter's values, in the order written


def _range(table: dict[str, Any], where: str) -> Sequence[int]:
    check_keys(table, RANGE_KEYS, where)
    start = positive_int(table.get("from", MISSING), f"{where}.from")
    stop = positive_int(table.get("to", MISSING), f"{where}.to")
    if stop < start:
        fail(f"{where}.to", f"a value not below from = {start}", stop)
    if ("times" in table) == ("step" in table):
        raise ConfigError(f"{where}: expected exactly one of 'times' (geometric) or 'step' (arithmetic).",
                          "e.g. { from = 64, to = 1024, times = 2 } or { from = 64, to = 1024, step = 64 }")
    if "step" in table:
        step = positive_int(table["step"], f"{where}.step")
        if (stop - start) // step >= MAX_SHAPES:
            raise ConfigError(f"{where}: expands to more than {MAX_SHAPES} values.", "Use a larger step.")
        return range(start, stop + 1, step)  # lazy: counted before anything is expanded
    factor = positive_int(table["times"], f"{where}.times")
    if factor < 2:
        fail(f"{where}.times", "an integer of at least 2", table["times"])
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
            fail(where, "a non-empty list of positive integers", value)
        return [positive_int(v, f"{where}[{i}]", SHAPE_INT_TEXT, least=0) for i, v in enumerate(value, 1)]
    return [positive_int(value, where, VALUE_TEXT, least=0)]


def _axes(table: Any, where: str) -> Axes:
    """One shape table, checked, with its count of shapes checked against MAX_SHAPES; nothing expanded."""
    if not isinstance(table, dict):
        fail(where, "a table such as { B = 32, T = [64, 128] }", table)
    axes = {name: _values(value, f"{where}.{name}") for name, value in table.items()}
    count = count_shapes([axes])
    if count > MAX_SHAPES:
        raise ConfigError(f"{where}: expands to {count} shapes (at most {MAX_SHAPES}).",
                          "Sweep fewer values, or split the sweep into cases along one parameter each.")
    return axes


def shape_axes(table: Any, where: str) -> list[Axes]:
    """A `shape` value -> one Axes per table (a list of tables gives each in turn)."""
    if isinstance(table, list):
        if not table:
            fail(where, "a shape table or a non-empty list of them", table)
        return [_axes(t, f"{where}[{i}]") for i, t in enumerate(table, 1)]
    return [_axes(table, where)]


def count_shapes(tables: Sequence[Axes]) -> int:
    """How many shapes `tables` expand to (repeats included): a product of lengths, nothing built."""
    return sum(math.prod(len(values) for values in axes.values()) for axes in tables)


def expand_axes(tables: Sequence[Axes]) -> list[dict[str, int]]:
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
    return expand_axes(shape_axes(table, where))
