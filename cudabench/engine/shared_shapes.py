"""A variant's first random-shapes verdict in a run, handed with its later requests to the judges of the
other GPUs (`SubjectRequest.shapes`): a judge takes it unless it checked the variant itself, and a failure
stays a failure. One per run, shared by its lanes or its Dask submissions; on a cluster of several GPU
models, only among the judges of one model."""

from __future__ import annotations

import threading
from typing import Any

from cudabench.measure.settings import shapes_key
from cudabench.results.records.model import Result


class SharedShapes:
    def __init__(self, fuzz: Any) -> None:
        self.fuzz = fuzz
        self._verdicts: dict[tuple, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def for_request(self, s: Any, where: str = "") -> tuple[str, ...]:
        """What a request for planned subject `s` carries: the first verdict of its key among the judges
        `where` names (one GPU model of a cluster; "" on one host), if any."""
        if s.role != "variant":
            return ()
        with self._lock:
            return self._verdicts.get((where, shapes_key(s.name, s.case, self.fuzz)), ())

    def note(self, s: Any, result: Result, where: str = "") -> None:
        """Keep `result`'s random-shapes verdict when it is the first of its key there."""
        check = next((c for c in result.integrity if c.name == "shapes" and c.verdict in ("pass", "fail")), None)
        if check is not None and s.role == "variant":
            with self._lock:
                self._verdicts.setdefault((where, shapes_key(s.name, s.case, self.fuzz)), (check.verdict, check.detail))
