"""What a function runs, beside which function object a name holds. The state guard
(cudabench.measure.state) compares the names it watches by identity; a subject can leave each object in
place and change what it runs instead:

    EventTimer.samples.__code__ = fake.__code__        # every later figure comes from `fake`
    settle_garbage.__defaults__ = (lambda: 0,)          # the guard's own collection does nothing
    wrapper.__closure__[0].cell_contents = other       # a decorator now calls `other`

So for every Python function among the watched values (and those their closures, `__wrapped__` (an
lru_cache's too) and partials reach) the guard also keeps its code, defaults, keyword defaults and closure
values, compares them by identity after each subject, puts back what differs and names it. The quick
check maps attribute getters over lists made once (about 0.2 ms for some 1,300 functions)."""

from __future__ import annotations

import functools
import operator
import types
from typing import Any, Iterable, NamedTuple

from cudabench.measure.unchanged import same_objects as _same

_EMPTY = object()  # a closure cell not yet filled
_CODE, _DEFAULTS, _KWDEFAULTS = (operator.attrgetter(a) for a in ("__code__", "__defaults__", "__kwdefaults__"))
_CONTENTS = operator.attrgetter("cell_contents")


def functions_of(value: Any) -> list[types.FunctionType]:
    """The Python functions a watched value is or holds directly (a static or class method's, a
    property's accessors)."""
    if isinstance(value, types.FunctionType):
        return [value]
    if isinstance(value, (staticmethod, classmethod)):
        return functions_of(value.__func__)
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)]
    return []


def _reached(value: Any) -> list[Any]:
    """What a value hands calls on to: a function's closure values, any object's `__wrapped__` (functools'
    wrappers, lru_cache's), a partial's function."""
    held = [getattr(value, "__wrapped__", None)]
    if isinstance(value, types.FunctionType):
        held += [_cell(c) for c in value.__closure__ or ()]
    if isinstance(value, functools.partial):
        held.append(value.func)
    return [h for h in held if h is not None and h is not _EMPTY]


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


class _Kept(NamedTuple):
    """What one function runs with: code, defaults, keyword defaults (the dict and its items), closure values."""

    code: Any
    defaults: Any
    kw: Any
    kw_items: tuple
    cells: tuple


def _kept(f: types.FunctionType) -> _Kept:
    kw = f.__kwdefaults__
    return _Kept(f.__code__, f.__defaults__, kw, tuple(kw.items()) if kw else (),
                 tuple(_cell(c) for c in f.__closure__ or ()))


def _flat_items(items: Iterable[tuple]) -> tuple:
    """Keyword defaults' (name, value) pairs as one run of objects, for an identity comparison."""
    return tuple(y for item in items for y in item)


class FunctionInternals:
    def __init__(self, named: Iterable[tuple[str, Any]]) -> None:
        """`named`: (name, watched value) pairs; a function reached through another is named after it."""
        self.names: dict[int, str] = {}
        self.functions: list[types.FunctionType] = []
        seen: set[int] = set()
        pending = [(name, value) for name, value in named]
        while pending:
            name, value = pending.pop()
            if id(value) in seen:
                f = value
                if isinstance(f, types.FunctionType) and name == f"{f.__module__}.{f.__qualname__}":
                    self.names[id(f)] = name  # the name it was defined under, where it is one
                continue
            seen.add(id(value))
            for f in functions_of(value):
                if id(f) not in self.names:
                    self.names[id(f)] = name
                    self.functions.append(f)
                pending += [(f"{name} → {getattr(h, '__qualname__', type(h).__name__)}", h) for h in _reached(f)]
            pending += [(f"{name} → {getattr(h, '__qualname__', type(h).__name__)}", h) for h in _reached(value)
                        if not isinstance(value, types.FunctionType)]
        self.kept = [_kept(f) for f in self.functions]
        self._quick()

    def _quick(self) -> None:
        """The lists the quick check maps over."""
        fs = self.functions
        self.codes, self.defaults = tuple(map(_CODE, fs)), tuple(map(_DEFAULTS, fs))
        self.kwdicts = tuple(map(_KWDEFAULTS, fs))
        cells = [c for f in fs for c in f.__closure__ or ()]
        self.filled = [c for c in cells if _cell(c) is not _EMPTY]
        self.empty = [c for c in cells if _cell(c) is _EMPTY]
        self.contents = tuple(map(_CONTENTS, self.filled))
        self.kw_items = tuple((d, tuple(d.items())) for d in self.kwdicts if d)

    def holds(self) -> bool:
        """Every function's code, defaults and closure values still the very objects they were."""
        fs = self.functions
        try:
            filled = _same(map(_CONTENTS, self.filled), self.contents)
        except ValueError:  # a cell emptied
            return False
        return (filled and _same(map(_CODE, fs), self.codes) and _same(map(_DEFAULTS, fs), self.defaults)
                and _same(map(_KWDEFAULTS, fs), self.kwdicts) and all(_cell(c) is _EMPTY for c in self.empty)
                and all(_same(_flat_items(d.items()), _flat_items(items)) for d, items in self.kw_items))

    def restore(self) -> list[str]:
        """Put back what differs; the names of what did ("NAME.__code__", ...)."""
        if self.holds():
            return []
        changed: list[str] = []
        for f, kept in zip(self.functions, self.kept):
            now, name = _kept(f), self.names[id(f)]
            if now.code is not kept.code:
                f.__code__ = kept.code
                changed.append(f"{name}.__code__")
            if now.defaults is not kept.defaults:
                f.__defaults__ = kept.defaults
                changed.append(f"{name}.__defaults__")
            if now.kw is not kept.kw or not _same(_flat_items(now.kw_items), _flat_items(kept.kw_items)):
                if kept.kw is not None:
                    kept.kw.clear()
                    kept.kw.update(kept.kw_items)
                f.__kwdefaults__ = kept.kw
                changed.append(f"{name}.__kwdefaults__")
            for cell, value in zip(f.__closure__ or (), kept.cells):
                if _cell(cell) is not value:
                    if value is _EMPTY:
                        del cell.cell_contents
                    else:
                        cell.cell_contents = value
                    changed.append(f"{name}.__closure__")
        return list(dict.fromkeys(changed))
