"""The correctness gate: a subject's outputs against the fp64 reference on the same fresh random
inputs, with the subject's outputs NaN-poisoned beforehand. Error = ‖out − ref‖ / ‖ref‖."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from cudabench.results.records.model import Check
from cudabench.measure.poison import poison
from cudabench.spec.family import Family
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
    norms = torch.stack([torch.linalg.vector_norm(got.detach().double() - ref).double(),
                         torch.linalg.vector_norm(ref).double()])
    diff, scale = norms.tolist()  # one read back (a synchronisation), not three
    return diff / scale if scale > 0 else diff


def output_specs(reference: Mapping[str, torch.Tensor], dtype: str) -> list[tuple[list[int], str]]:
    """(shape, dtype) of each output a subject returns: the reference's shapes in the case's dtype."""
    return [(list(ref.shape), dtype) for ref in reference.values()]


def check_workload(workload: Workload, reference: Mapping[str, torch.Tensor], tolerance: float,
                   dtype: str = "float32") -> Check:
    """One call checked in this process, its outputs' memory NaN-poisoned first. Only for commands
    that time one subject in their own process (compare-sync-modes, profile): `cudabench run` and
    `check` judge in another process (cudabench.measure.judge)."""
    device = next(iter(reference.values())).device
    poison(output_specs(reference, dtype), device, nan=True, copies=1 if device.type == "cuda" else 8)
    got = workload.call()
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    return compare(got, reference, tolerance)


def compare(got: Mapping[str, Any], reference: Mapping[str, torch.Tensor], tolerance: float) -> Check:
    """Each named output's relative error against the reference (NaN for a missing one)."""
    errors = tuple((name, relative_error(got[name], ref) if name in got else float("nan"))
                   for name, ref in reference.items())
    return Check(errors=errors, tolerance=tolerance)
