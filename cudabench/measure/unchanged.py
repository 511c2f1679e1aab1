"""A quick answer to the state guard's first question after each subject (cudabench.measure.state):
is every watched attribute still the very object it was, does every watched namespace still hold the
very same names, and does every harness module still hold the very same values? Thousands of identity
checks run in C here (about 3 ms a subject in Python on the H100's host, twice a subject). Any
difference sends the guard to its full walk, which finds, restores and names what changed, then takes
a new snapshot. Everything is compared by identity, never by ==: a subject's object (or a dict key of
its own str subclass) could answer == as it likes."""

from __future__ import annotations

import operator
import sys
from typing import Any, Iterable


def same_objects(now: Iterable[Any], then: tuple) -> bool:
    """`now` holds the very objects of `then`, in order (compared by identity, never by ==)."""
    now = tuple(now)
    return len(now) == len(then) and all(map(operator.is_, now, then))


class Unchanged:
    def __init__(self, entries: Iterable[tuple[Any, str, Any]], namespaces: Iterable[Any],
                 modules: Iterable[Any]) -> None:
        """`entries`: (owner, attribute, value) compared by identity in the owner's own dict;
        `namespaces`: classes (and modules) whose names must stay the same; `modules`: modules whose
        every name and value must stay the same. The names of sys.modules must stay the same too (a
        module imported since is walked once, and watched from then on)."""
        groups: dict[int, tuple[Any, list[str], list[Any]]] = {}
        for owner, attr, value in entries:
            group = groups.setdefault(id(owner), (owner, [], []))
            group[1].append(attr)
            group[2].append(value)
        # itemgetter of two or more names gives a tuple: a lone name is asked for twice
        self.groups = [(owner, operator.itemgetter(*(names * 2 if len(names) == 1 else names)),
                        tuple(values * 2 if len(values) == 1 else values))
                       for owner, names, values in groups.values()]
        self.names = [(owner, tuple(vars(owner))) for owner in {id(n): n for n in namespaces}.values()]
        self.modules = [(m, tuple(vars(m)), tuple(vars(m).values())) for m in {id(m): m for m in modules}.values()]
        self.loaded = tuple(sys.modules)

    def holds(self) -> bool:
        for owner, get, values in self.groups:
            try:
                now = get(vars(owner))
            except KeyError:
                return False
            if not all(map(operator.is_, now, values)):
                return False
        return (all(same_objects(vars(owner), names) for owner, names in self.names)
                and all(same_objects(vars(m), names) and same_objects(vars(m).values(), values) for m, names, values in self.modules)
                and same_objects(sys.modules, self.loaded))
