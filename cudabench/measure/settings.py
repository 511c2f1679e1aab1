"""How the parent asks a worker to treat a subject: plain data, kept free of torch so planning
(in the parent) does not import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from cudabench.measure.loop import Warmup
from cudabench.measure.stop import StopRule, rule_from_dict
from cudabench.results.records.model import Case


@dataclass(frozen=True)
class Settings:
    """How to treat a subject: plain data, sent by the parent to the worker."""

    timing: str = "sync"
    rule: dict = field(default_factory=lambda: {"kind": "adaptive"})
    warmup_calls: int = Warmup.calls
    warmup_seconds: float = Warmup.seconds
    force: bool = False                 # time subjects that fail the check
    time: bool = True                   # False: check against the reference only
    cold: bool = False                  # flush L2 before every timed call
    integrity: bool = True
    fuzz: int = 2                       # random shapes each variant is also checked at (0: not checked)
    seed: int = 0
    arch: Optional[str] = None
    kernel_time_below: float = 100e-6   # also read CUPTI kernel time for calls this short
    nvtx: bool = False
    nvtx_iterations: bool = False

    @property
    def stop_rule(self) -> StopRule:
        return rule_from_dict(self.rule)

    @property
    def warmup(self) -> Warmup:
        return Warmup(self.warmup_calls, self.warmup_seconds)


def shapes_key(subject: str, case: Case, fuzz: int) -> tuple:
    """What a variant's check at random shapes depends on: done once per key in a run (the shapes do
    not depend on the case's own shape), and shared between the GPUs' judges by the caller."""
    return (case.family, subject, case.dtype, case.direction, case.inputs, fuzz)
