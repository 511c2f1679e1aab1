"""The harness's long-lived objects, compared attribute by attribute after each subject (part of
cudabench.measure.state's StateGuard): the subject process's request handler, runner, pipe reader and
writer, and each built extension module from the moment it is made. A subject's code can replace a
method on such an object itself (not on its class, which the module walk compares), swap its class,
or replace a function of another family's extension under a later subject of that family."""

from __future__ import annotations

import inspect
from typing import Any

_MISSING = object()


class WatchedObjects:
    def __init__(self) -> None:
        self.objects: dict[int, tuple[Any, type, dict[str, Any], frozenset[str]]] = {}
        self.entries: dict[tuple[int, Any], tuple[dict, Any, Any]] = {}

    def watch(self, obj: Any, changing: tuple[str, ...] = ()) -> None:
        """Compare this object's own attributes (all but `changing`, which the harness changes from one
        subject to the next) and its class from now on."""
        if id(obj) not in self.objects and hasattr(obj, "__dict__"):  # a family with no sources has None
            self.objects[id(obj)] = (obj, type(obj), dict(vars(obj)), frozenset(changing))

    def watch_loaded(self, loaded: dict, key: Any, module: Any) -> None:
        """A built extension, from the moment it is made: its attributes, and that `loaded[key]` (the
        process's cache of loaded libraries) still hands out this module."""
        self.watch(module)
        self.entries[(id(loaded), key)] = (loaded, key, module)

    def accept(self, obj: Any, attr: str) -> None:
        """The harness set `attr` of a watched object: its value now is the one to compare with."""
        entry = self.objects.get(id(obj))
        if entry is not None:
            entry[2][attr] = vars(obj)[attr]

    def kept(self, obj: Any, attr: str) -> Any:
        """The value of a watched object's attribute as the harness last set it (what `restore` compares with),
        whatever the attribute holds now; an object not watched: what it holds."""
        entry = self.objects.get(id(obj))
        return entry[2][attr] if entry is not None and attr in entry[2] else getattr(obj, attr)

    def restore(self) -> list[str]:
        """Put back whatever differs; the names of what did."""
        patched = []
        for loaded, key, module in self.entries.values():
            if loaded.get(key) is not module:
                loaded[key] = module
                patched.append(f"the loaded extension {key}")
        for obj, cls, pristine, changing in self.objects.values():
            label = obj.__name__ if inspect.ismodule(obj) else f"{cls.__module__}.{cls.__qualname__}()"
            if type(obj) is not cls:
                obj.__class__ = cls
                patched.append(f"{label}.__class__")
            now = vars(obj)
            for attr in (set(now) | set(pristine)) - changing:
                if now.get(attr, _MISSING) is pristine.get(attr, _MISSING):
                    continue
                if attr in pristine:
                    now[attr] = pristine[attr]
                else:
                    del now[attr]
                patched.append(f"{label}.{attr}")
        return patched
