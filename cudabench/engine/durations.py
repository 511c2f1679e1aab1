"""How long each subject took when it last ran on this machine (seconds in its worker, its phases
summed), kept under the cache folder. Several GPUs, or a cluster, start the longest subjects first,
so that no long one starts last and leaves the other GPUs idle at the end. A first run has only the
plan's guess from the family's flop and byte counts, which is the same for every subject of a case:
on the 4×H100 host attn-naive's N=8192 fwd+bwd (24 s, slower than its flops say) then started among
the rest and ended the run alone. Runs after it use what it took."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from pathlib import Path
from typing import Iterable

from cudabench.engine.plan import Planned, RunOptions, longest_first
from cudabench.errors import CudabenchError
from cudabench.outputs import write_text_atomic
from cudabench.results.records.model import Result
from cudabench.spec.build import cache_root

# A subject makes about this many calls (warm-up, samples, judged calls, the CUPTI pass): the plan's
# guess of one call's time times this stands for its seconds while nothing is recorded
CALLS_PER_SUBJECT = 60


def durations_file() -> Path:
    return cache_root() / "durations.json"


def run_context(options: RunOptions) -> str:
    """What makes a subject take longer or shorter beside its case: the run's settings (timer, stop
    rule, warm-up, integrity, ...; not its seed), as a short digest."""
    settings = {k: v for k, v in dataclasses.asdict(options.settings(0)).items() if k != "seed"}
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _load() -> dict[str, float]:
    try:
        data = json.loads(durations_file().read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: the plan's guesses
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class Durations:
    """One run's use of the file: rank its queue by it, note what each subject took, save at the end."""

    def __init__(self, context: str = "") -> None:
        self.context = context  # run_context(): a quick --repeat 5 run records apart from full runs
        self.known = _load()
        self.took: dict[str, float] = {}

    def key(self, s: Planned) -> str:
        return f"{self.context}|{s.case.key}|{s.role}|{s.name}"

    def ranked(self, queue: Iterable[tuple[int, Planned]]) -> list[tuple[int, Planned]]:
        """The queue, longest expected first: by what each subject took last time, else by the guess
        scaled as the recorded subjects of this queue compare with theirs (a guess of one call is
        far below a subject's seconds, and a new subject must not wait behind every recorded one)."""
        queue = list(queue)
        ratios = [self.known[self.key(s)] / s.expected_seconds for _, s in queue
                  if self.key(s) in self.known and s.expected_seconds > 0]
        scale = statistics.median(ratios) if ratios else CALLS_PER_SUBJECT
        estimated = [(position, dataclasses.replace(s, expected_seconds=self.known.get(
                        self.key(s), s.expected_seconds * scale)))
                     for position, s in queue]
        return sorted(estimated, key=longest_first)

    def note(self, s: Planned, result: Result) -> None:
        if result.phases:  # a skip, or a subject lost before its phases, adds nothing
            self.took[self.key(s)] = round(sum(seconds for _, seconds in result.phases), 3)

    def save(self) -> None:
        if not self.took:
            return
        try:
            write_text_atomic(durations_file(), json.dumps({**_load(), **self.took}, sort_keys=True))
        except (OSError, CudabenchError):
            pass  # a read-only cache folder: the next run guesses again; the run itself goes on
