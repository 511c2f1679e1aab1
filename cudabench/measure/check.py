"""The correctness gate: a subject's outputs against the fp64 reference on the same fresh random
inputs, with the subject's outputs NaN-poisoned beforehand. Error = ‖out − ref‖ / ‖ref‖."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from cudabench.results.model import Check
from cudabench.spec.family import Family, poisoned_outputs
from cudabench.measure.workload import Workload, make_workload


def to_float64(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v.detach().double() if torch.is_tensor(v) else v) for k, v in inputs.items()}


def reference_results(family: Family, inputs: Mapping[str, Any], direction: str,
                      grad_out: Any = None) -> dict[str, torch.Tensor]:
    """The reference's outputs (and gradients, via autograd) computed in float64."""
    wl = make_workload(family.reference, to_float64(inputs), direction, family.grad_inputs,
                       None if grad_out is None else grad_out.double())
    return {k: v.detach() for k, v in wl.results().items()}


def relative_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    """‖got − ref‖ / ‖ref‖ in float64; NaN if any element is NaN (e.g. an output never written);
    inf on a shape mismatch."""
    if tuple(got.shape) != tuple(ref.shape):
        return float("inf")
    diff = torch.linalg.vector_norm(got.detach().double() - ref)
    scale = torch.linalg.vector_norm(ref)
    return float(diff / scale) if float(scale) > 0 else float(diff)


def check_workload(workload: Workload, reference: Mapping[str, torch.Tensor], tolerance: float) -> Check:
    with poisoned_outputs():
        got = workload.results()
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    errors = tuple((name, relative_error(got[name], ref)) for name, ref in reference.items()
                   if name in got)
    missing = [name for name in reference if name not in got]
    errors += tuple((name, float("nan")) for name in missing)
    return Check(errors=errors, tolerance=tolerance)
