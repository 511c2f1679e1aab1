"""Input kinds every family has beside its own: its first kind's draw reshaped, so a kernel tuned to
one distribution (values in [-1, 1], no zeros, no repeats) meets others. The values stay where an
honest float32-accumulating kernel is exact to its tolerance (for `large`, the reference decides
how far that is).

    outliers   normal values, 1 in 100 of them 100 times larger
    pareto     heavy-tailed: a random sign times Pareto(α = 2.5), so the largest are hundreds
    constant   every element of a tensor the same random value (sums of equal terms, ties)
    zeros      half the elements +0 or -0 or subnormal (in the case's precision), the rest normal
    large      the first kind's values scaled toward the overflow of the case's precision, as far as
               the reference computed in float32 stays right (made by cudabench.measure.kinds,
               which needs the reference; `reshape` leaves it alone)"""

from __future__ import annotations

from typing import Any

LARGE = "large"
GENERIC_KINDS = ("outliers", "pareto", "constant", "zeros", LARGE)


def reshape(inputs: dict[str, Any], kind: str, gen: Any) -> dict[str, Any]:
    """The floating-point tensors of a first-kind draw turned into `kind`, from the same generator."""
    import torch

    if kind == LARGE:
        raise ValueError("the large kind is scaled by cudabench.measure.subject.case_inputs, which has the reference")

    out = {}
    for name, value in inputs.items():
        if not (torch.is_tensor(value) and value.is_floating_point()):
            out[name] = value
            continue
        out[name] = _one(value, kind, gen)
    return out


def _one(t: Any, kind: str, gen: Any) -> Any:
    import torch

    def uniform() -> Any:
        return torch.empty_like(t).uniform_(0, 1, generator=gen)

    if kind == "outliers":
        values = torch.empty_like(t).normal_(0, 1, generator=gen)
        return torch.where(uniform() < 0.01, values * 100, values)
    if kind == "pareto":
        sign = torch.where(uniform() < 0.5, -1.0, 1.0).to(t.dtype)
        return sign * (1 - uniform()).clamp_min(1e-6).pow(-1 / 2.5)
    if kind == "constant":
        value = float(torch.empty((), device=t.device).uniform_(0.5, 1.5, generator=gen))
        return torch.full_like(t, value if float(uniform().flatten()[0]) < 0.5 else -value)
    if kind == "zeros":
        pick = uniform()
        tiny = torch.finfo(torch.bfloat16).tiny  # subnormal in float32 below this; the caller rounds
        special = torch.where(pick < 0.2, 0.0, torch.where(pick < 0.35, -0.0, tiny * 0.5 * pick))
        return torch.where(uniform() < 0.5, special.to(t.dtype), t)
    raise ValueError(f"unknown input kind {kind!r}")
