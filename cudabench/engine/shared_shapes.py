"""A variant's first random-shapes verdict in a run, handed with its later requests to the judges of the
other GPUs (`SubjectRequest.shapes`): a judge takes it unless it checked the variant itself, and a failure
stays a failure. One per run, shared by its lanes or its Dask submissions; on a cluster of several GPU
models, only among the judges of one model.

While one lane's judge checks a key, the other lanes take other subjects first (`elsewhere`), so that a
key is checked once where the queue allows, not by every GPU that reaches it before the first verdict."""

from __future__ import annotations

import threading
from typing import Any

from cudabench.measure.settings import shapes_key
from cudabench.results.records.model import Result


class SharedShapes:
    def __init__(self, fuzz: Any) -> None:
        self.fuzz = fuzz
        self._verdicts: dict[tuple, tuple[str, str]] = {}
        self._checking: dict[tuple, Any] = {}  # key -> the lane whose judge checks it now
        self._lock = threading.Lock()

    def _key(self, s: Any, where: str) -> tuple:
        return (where, shapes_key(s.name, s.case, self.fuzz))

    def elsewhere(self, s: Any, lane: Any) -> bool:
        """Whether `s`'s key has no verdict yet and another lane's judge is checking it now."""
        if s.role != "variant":
            return False
        key = self._key(s, "")
        with self._lock:
            return key not in self._verdicts and self._checking.get(key, lane) is not lane

    def claim(self, s: Any, lane: Any) -> None:
        """`lane` took `s`: its judge checks the key unless it has a verdict or another lane checks it."""
        if s.role == "variant":
            key = self._key(s, "")
            with self._lock:
                if key not in self._verdicts:
                    self._checking.setdefault(key, lane)

    def release(self, s: Any, lane: Any) -> None:
        """`lane` is done with `s` (answered, or given back): its claim on the key ends."""
        key = self._key(s, "")
        with self._lock:
            if self._checking.get(key) is lane:
                del self._checking[key]

    def for_request(self, s: Any, where: str = "") -> tuple[str, ...]:
        """What a request for planned subject `s` carries: the first verdict of its key among the judges
        `where` names (one GPU model of a cluster; "" on one host), if any."""
        if s.role != "variant":
            return ()
        with self._lock:
            return self._verdicts.get(self._key(s, where), ())

    def note(self, s: Any, result: Result, where: str = "") -> None:
        """Keep `result`'s random-shapes verdict when it is the first of its key there."""
        check = next((c for c in result.integrity if c.name == "shapes" and c.verdict in ("pass", "fail")), None)
        if check is not None and s.role == "variant":
            with self._lock:
                self._verdicts.setdefault(self._key(s, where), (check.verdict, check.detail))
