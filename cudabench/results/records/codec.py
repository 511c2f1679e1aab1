"""Records as plain data and back, for every frozen dataclass of cudabench.results.records.model, read from the
records' own fields and type hints: a field added to a record is in the files, the worker messages
and the schema check (cudabench.results.records.schema) with no other edit.

How a field's type reads as data:

    tuple[tuple[str, T], ...]   an object {name: T}          (a case's shape, clocks, phases)
    tuple[T, ...]               a list [T]                   (samples, integrity checks)
    a record                    an object of its fields
    Optional[T]                 null or T
    str, int, float, bool       themselves; floats go through JSON as "nan", "inf", "-inf" (export.json_safe)

A field made with `later(default)` is absent from files written before it existed: readers take the
default. One made with `blank_as_null()` writes "" as null. A property declared with `written` is
carried beside the fields for readers of the file (a case's key, a result's status) and recomputed,
never read back."""

from __future__ import annotations

import dataclasses
import functools
import sys
import typing
from typing import Any, Literal, Mapping, Optional, Union, get_args, get_origin

LATER = "absent in older files"
BLANK_AS_NULL = "'' is written as null"


def later(default: Any, blank_as_null: bool = False) -> Any:
    """A field that files written before it existed lack: readers take `default`."""
    return dataclasses.field(default=default, metadata={LATER: True, BLANK_AS_NULL: blank_as_null})


def blank_as_null() -> Any:
    """A text field written as null when it is empty (a reason that is not there)."""
    return dataclasses.field(default="", metadata={BLANK_AS_NULL: True})


class written(property):
    """A property that files carry beside the record's fields. Readers of records recompute it."""

    later = False


class written_later(written):
    """A written property that files from before it existed lack."""

    later = True


@dataclasses.dataclass(frozen=True)
class Kind:
    """How one type hint reads as data: its form and what it holds."""

    form: str                   # mapping | list | record | optional | literal | scalar
    inner: Any = None           # the Kind of the values / items / optional's type; the record's class
    values: tuple = ()          # a Literal's values


@functools.lru_cache(maxsize=None)
def kind_of(hint: Any) -> Kind:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union:
        rest = [a for a in args if a is not type(None)]
        return Kind("optional", kind_of(rest[0]))
    if origin is Literal:
        return Kind("literal", values=args)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = args[0]
        if get_origin(item) is tuple and len(get_args(item)) == 2 and get_args(item)[0] is str:
            return Kind("mapping", kind_of(get_args(item)[1]))
        return Kind("list", kind_of(item))
    if dataclasses.is_dataclass(hint):
        return Kind("record", hint)
    return Kind("scalar", hint)


@functools.lru_cache(maxsize=None)
def hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))


@functools.lru_cache(maxsize=None)
def written_properties(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """(name, return type, added later) of each `written` property of `cls`, in definition order."""
    module = vars(sys.modules[cls.__module__])
    return tuple((name, typing.get_type_hints(prop.fget, module)["return"], prop.later)
                 for name, prop in vars(cls).items() if isinstance(prop, written))


def to_data(record: Any) -> dict[str, Any]:
    """A record as plain data: its fields, then its written properties."""
    cls = type(record)
    data = {}
    for f in dataclasses.fields(cls):
        value = getattr(record, f.name)
        data[f.name] = None if f.metadata.get(BLANK_AS_NULL) and value == "" else _plain(value, kind_of(hints(cls)[f.name]))
    for name, hint, _ in written_properties(cls):
        data[name] = _plain(getattr(record, name), kind_of(hint))
    return data


def _plain(value: Any, kind: Kind) -> Any:
    if value is None:
        return None
    if kind.form == "optional":
        return _plain(value, kind.inner)
    if kind.form == "mapping":
        return {k: _plain(v, kind.inner) for k, v in value}
    if kind.form == "list":
        return [_plain(v, kind.inner) for v in value]
    if kind.form == "record":
        return to_data(value)
    return value


def from_data(cls: type, data: Mapping[str, Any]) -> Any:
    """The record that `to_data` wrote (or a reader of files normalised): unknown keys and written
    properties are ignored; a field that is missing or null where its type allows no null takes its
    default (a later field in an older file)."""
    values = {}
    for f in dataclasses.fields(cls):
        kind = kind_of(hints(cls)[f.name])
        raw = data.get(f.name)
        if raw is None and not (kind.form == "optional" and f.name in data):
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}.{f.name} is missing")
            continue
        values[f.name] = _record_value(raw, kind)
    return cls(**values)


def _record_value(raw: Any, kind: Kind) -> Any:
    if raw is None:
        return None
    if kind.form == "optional":
        return _record_value(raw, kind.inner)
    if kind.form == "mapping":
        return tuple((k, _record_value(v, kind.inner)) for k, v in raw.items())
    if kind.form == "list":
        return tuple(_record_value(v, kind.inner) for v in raw)
    if kind.form == "record":
        return from_data(kind.inner, raw)
    if kind.form == "scalar" and kind.inner in (int, float):
        return kind.inner(raw)  # float("nan") reads the strings JSON needs
    return raw


def default_data(field: dataclasses.Field, kind: Kind) -> Optional[Any]:
    """What a reader of an older file takes for a later field: its default as data (NaN: unknown, null)."""
    default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    if field.metadata.get(BLANK_AS_NULL) and default == "":
        return None
    if isinstance(default, float) and default != default:
        return None
    return _plain(default, kind)
