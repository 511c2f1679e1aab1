"""What a round of judged calls found (cudabench.measure.judged_calls), the draws of a first round made
ahead of it, and how a second round's timing verdicts combine with the first's."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple, Optional

from cudabench.results.records.model import Check, IntegrityCheck


class Prepared(NamedTuple):
    """A first round's draws made ahead (JudgedCalls.prepare_calls): the other kind's call as `_other_kind`
    gives it, and the CHECKED_DRAWS checked draws with their references (None: made by the round)."""

    kind: tuple
    checked: Optional[list] = None


class Round:
    """What one round of judged calls found."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = {"new": [], "same": []}
        self.errors: list[Check] = []
        self.problems: list[IntegrityCheck] = []
        self.repeat: Optional[dict] = None
        self.kind_check: Optional[Check] = None


def confirmed(first: list[IntegrityCheck], second: list[IntegrityCheck]) -> list[IntegrityCheck]:
    """The first round's timing verdicts once a second round was run: a failure stands when the
    second round fails either check (a cache that stops caching when it sees more judged calls than
    usual fails hot-loop instead), and is cleared otherwise."""
    again = [c for c in second if c.failed]
    out = []
    for c, later in zip(first, second):
        if not c.failed:
            out.append(c)
        elif again:
            out.append(replace(c, detail=f"{c.detail}; again in a second round of judged calls: "
                                         f"{'; '.join(a.detail for a in again)}"))
        else:
            out.append(replace(later, detail=f"{later.detail} (a second round of judged calls; the first "
                                             f"flagged it: {c.detail})"))
    return out


def dedupe(checks: list[IntegrityCheck]) -> list[IntegrityCheck]:
    seen, out = set(), []
    for c in checks:
        if (c.name, c.detail) not in seen:
            seen.add((c.name, c.detail))
            out.append(c)
    return out
