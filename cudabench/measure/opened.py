"""One subject while it is open in the subject process (cudabench.measure.blind): its op, its inputs (shared
with the judge), its timer, and what the requests between `open` and `finish` leave for the next one."""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from cudabench.measure.settings import Settings
from cudabench.measure.timers import CuptiRound
from cudabench.measure.workload import make_workload
from cudabench.results.records.model import Case
from cudabench.spec.family import Family


class Opened:
    """One subject while it is open: its op, inputs (shared with the judge) and timer."""

    def __init__(self, family: Family, case: Case, op: Callable[..., Any], inputs: dict, grad_out: Any,
                 settings: Settings, outputs: list) -> None:
        self.family, self.case, self.op, self.settings = family, case, op, settings
        self.inputs, self.grad_out = inputs, grad_out
        self.pristine = ({k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)},
                         None if grad_out is None else grad_out.clone())
        self.outputs = outputs          # [(shape, dtype)] the judge expects: sizes to poison
        self.timer: Any = None          # prepared by `hot`; judged calls after it are timed with it
        self.round: Optional[CuptiRound] = None  # judged calls timed by kernel time, when started
        self.last: dict = {}            # the last judged call's outputs, kept until the next request
        self.pending: Any = None        # a backward's workload whose forward `forward` made
        self.gen = torch.Generator(device=inputs_device(inputs)).manual_seed(settings.seed ^ 0x5EED)
        self.first_call = True
        self.hot_median = 0.0

    def workload(self) -> Any:
        """The call on the current input values (a backward's stored forward is made again, untimed,
        since the values may have changed since the last one)."""
        return make_workload(self.op, self.inputs, self.case.direction, self.family.grad_inputs, self.grad_out)


def inputs_device(inputs: dict) -> Any:
    return next((v.device for v in inputs.values() if torch.is_tensor(v)), torch.device("cpu"))
