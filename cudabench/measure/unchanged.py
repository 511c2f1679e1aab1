"""A quick answer to the state guard's first question after each subject (cudabench.measure.state):
is every watched attribute still the very object it was, and does every watched namespace still hold
exactly the names it held? Thousands of identity checks run in C here (about 3 ms a subject in Python
on the H100's host, twice a subject). Any difference sends the guard to its full walk, which finds,
restores and names what changed, then takes a new snapshot."""

from __future__ import annotations

import operator
import sys
from typing import Any, Iterable


class Unchanged:
    def __init__(self, entries: Iterable[tuple[Any, str, Any]], namespaces: Iterable[Any], prefix: str) -> None:
        """`entries`: (owner, attribute, value) compared by identity in the owner's own dict;
        `namespaces`: modules and classes whose set of names must stay as it is; `prefix`: modules
        whose first import since the snapshot counts as a change too."""
        groups: dict[int, tuple[Any, list[str], list[Any]]] = {}
        for owner, attr, value in entries:
            group = groups.setdefault(id(owner), (owner, [], []))
            group[1].append(attr)
            group[2].append(value)
        # itemgetter of two or more names gives a tuple: a lone name is asked for twice
        self.groups = [(owner, operator.itemgetter(*(names * 2 if len(names) == 1 else names)),
                        tuple(values * 2 if len(values) == 1 else values))
                       for owner, names, values in groups.values()]
        self.names = [(owner, frozenset(vars(owner))) for owner in {id(n): n for n in namespaces}.values()]
        self.prefix = prefix
        self.modules_seen = len(sys.modules)
        self.modules = self._modules()

    def _modules(self) -> frozenset[str]:
        return frozenset(n for n in list(sys.modules) if n == self.prefix or n.startswith(self.prefix + "."))

    def holds(self) -> bool:
        for owner, get, values in self.groups:
            try:
                now = get(vars(owner))
            except KeyError:
                return False
            if not all(map(operator.is_, now, values)):
                return False
        if not all(vars(owner).keys() == names for owner, names in self.names):
            return False
        if len(sys.modules) != self.modules_seen:  # a module loaded or dropped: which ones, by name
            if self._modules() != self.modules:
                return False
            self.modules_seen = len(sys.modules)
        return True
