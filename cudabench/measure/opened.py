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
                 settings: Settings, outputs: list, role: str = "variant") -> None:
        self.family, self.case, self.op, self.settings, self.role = family, case, op, settings, role
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
        self.lanes: list[tuple[dict, Any]] = []  # a graph's other calls' inputs (cudabench.measure.lanes)

    def workload(self) -> Any:
        """The call on the current input values (a backward's stored forward is made again, untimed,
        since the values may have changed since the last one)."""
        return make_workload(self.op, self.inputs, self.case.direction, self.family.grad_inputs, self.grad_out)

    def lane_calls(self, count: int, device: str) -> list[Any]:
        """The calls of lanes 1 .. count-1 of a graph, each on inputs of its own, drawn from seeds of their
        own (values that are not tensors, such as eps, are the subject's)."""
        from cudabench.measure.lanes import lane_seeds
        from cudabench.measure.subject import case_inputs

        self.lanes = []
        for seed in lane_seeds(self.settings.seed, count):
            inputs, grad_out = case_inputs(self.family, self.case, seed, device)
            self.lanes.append(({k: (v if torch.is_tensor(v) else self.inputs[k]) for k, v in inputs.items()}, grad_out))
        return [make_workload(self.op, inputs, self.case.direction, self.family.grad_inputs, grad).call
                for inputs, grad in self.lanes]


def inputs_device(inputs: dict) -> Any:
    return next((v.device for v in inputs.values() if torch.is_tensor(v)), torch.device("cpu"))
