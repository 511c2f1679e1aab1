"""What the judge needs to know about input kinds beyond drawing them: whether a draw is one an honest
kernel can get right (`honest_can_pass`), and how far the `large` kind scales (`large_exponent`).

An honest kernel here accumulates in float32 and stores in the case's precision. It can get a draw
right when the reference, run in float32 on the same (rounded) inputs, is finite, stays 2^HEADROOM
below the precision's largest value, and is within a quarter of the tolerance of the fp64
reference (SUMMATION_SLACK: another honest summation order can be a few times float32's own error;
attn-flash1's fwd+bwd on outliers was 5.7e-5 against the tolerance 5e-5 on the H100 where half was
the rule). Otherwise the draw tests the reference's conditioning, not the kernel: attention's
gradients on all-equal inputs are rounding noise around zero, and sums of float16 outliers overflow
float16 whatever the kernel does.

A family whose honest kernels round intermediates to the case's precision (attention's P and dS
feed tensor cores in bfloat16) gives that math as `Family.rounded_reference`. On outliers that rounding
alone takes an honest bfloat16 dK to 0.015-0.035 against the tolerance 0.0157. So a call on another kind
in a lower precision is held to ROUNDING_SLACK times what the rounded math errs on its draw, where that
is more than the tolerance (`rounding_allowance`); a draw it errs on by more than ROUNDING_CAP
tolerances tests the rounding, not the kernel, and another is drawn. Skipping such draws instead, kept
per case, left attention almost no outliers or pareto draws, the kinds that catch a kernel that skips
softmax's max subtraction; a kernel tuned to one distribution is off by far more than the allowance.

`large` scales the first kind's values by the largest power of two at which that still holds (only
the inputs a family names in `large_inputs`, else every floating-point one). A kernel that squares
its inputs, keeps an intermediate in a narrower type or skips softmax's max subtraction then
overflows. A power of two changes no value's digits, only its exponent."""

from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch

from cudabench.measure.check import reference_results, relative_error
from cudabench.measure.workload import make_workload
from cudabench.spec.family import UNIT_ROUNDOFF

HEADROOM = {"float32": 16, "bfloat16": 16, "float16": 4}  # bits below the largest value: room for
#                                                           another summation order's intermediates
SUMMATION_SLACK = 4  # the float32 reference within tolerance / this: see the module's note
ROUNDING_SLACK = 2   # a kind call's tolerance: at least this many times the rounded math's error on its draw
ROUNDING_CAP = 4     # a draw the rounded math errs on by more than this many tolerances is not used
_exponents: dict[tuple, int] = {}  # (family, case key) -> exponent: once per case and process


def honest_can_pass(family: Any, case: Any, inputs: dict[str, Any], grad_out: Any,
                    reference: Optional[dict] = None, margin_bits: int = 0) -> bool:
    """Whether an honest float32-accumulating kernel can pass a check on these inputs (already in the
    case's precision); `reference` is their fp64 reference, if already computed. `margin_bits` more
    headroom below the largest value."""
    limit = torch.finfo(getattr(torch, case.dtype)).max / 2.0**(HEADROOM[case.dtype] + margin_bits)
    as_float32 = {k: (v.float() if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in inputs.items()}
    with torch.enable_grad():
        got = make_workload(family.reference, as_float32, case.direction, family.grad_inputs,
                            None if grad_out is None else grad_out.float()).results()
    want = reference if reference is not None else reference_results(family, inputs, case.direction, grad_out)
    tolerance = held_to(family, case) / SUMMATION_SLACK
    for name, value in got.items():
        v = value.detach()
        if not bool(torch.isfinite(v).all()) or (v.numel() and float(v.abs().max()) > limit):
            return False
        if relative_error(v, want[name]) > tolerance:
            return False
    return True


def held_to(family: Any, case: Any) -> float:
    """The tolerance of a case before any draw: the family's, or for draws of equal terms (the
    `constant` kind) in a family that gives its reduction length n, n float32 roundoffs if that is
    more. An honest float32 sum of n equal terms added one by one rounds a growing partial sum at each
    step: 0.18·n·u norm-wise at worst over 200 draws (1.1e-5 at n = 1024, against timex's 1e-5; an
    honest timex-v4 was INVALID so in one sweep of 25), n·u at most to first order. Terms that differ
    in sign and size err about √n·u, which the family's tolerance already bounds. One figure holds every
    output of the call: the longest sum's (timex-v1's backward adds gw's B·T terms one by one; its out
    and gk, T terms each, are held to the same)."""
    tolerance = family.tolerance_for(case.dtype)
    reduction = getattr(family, "reduction", None)
    if case.inputs != "constant" or reduction is None:
        return tolerance
    from cudabench.spec.registry import spec_call

    return max(tolerance, spec_call(family, "reduction", reduction, case.params, case.direction) * UNIT_ROUNDOFF["float32"])


def rounding_allowance(family: Any, case: Any, inputs: dict[str, Any], grad_out: Any, reference: dict) -> float:
    """The tolerance a call on these inputs (in the case's precision) is held to: the family's, or for a
    family whose kernels round intermediates (see the module's note) ROUNDING_SLACK times what its rounded
    math errs on them, if that is more; inf where that math errs by more than ROUNDING_CAP tolerances or
    does not stay finite (float16's dS can overflow): such a draw is not used."""
    tolerance = held_to(family, case)
    if case.dtype == "float32" or family.rounded_reference is None:
        return tolerance
    with torch.enable_grad():
        got = make_workload(family.rounded_reference, inputs, case.direction, family.grad_inputs,
                            grad_out).results()
    errors = [relative_error(v.detach(), reference[name]) for name, v in got.items()]
    worst = max(errors, default=0.0)
    if not all(math.isfinite(e) for e in errors) or worst > ROUNDING_CAP * tolerance:
        return math.inf
    return max(tolerance, ROUNDING_SLACK * worst)


def widened(family: Any, case: Any) -> bool:
    """Whether a case's own draws are held to what rounding allows on each (draw_tolerance)."""
    return case.inputs != family.input_kinds[0] and case.dtype != "float32" and family.rounded_reference is not None


def draw_tolerance(family: Any, case: Any, inputs: dict[str, Any], grad_out: Any, reference: dict) -> float:
    """What a call on a draw of the case's own kind is held to: the family's tolerance, or where the case
    asks for another kind than the family's first in a lower precision, rounding_allowance on the draw (an
    honest attention kernel misses the tolerance on some outliers draws in bfloat16); inf where no honest
    kernel can be held to it."""
    if not widened(family, case):
        return held_to(family, case)
    return rounding_allowance(family, case, inputs, grad_out, reference)


def scaled(inputs: dict[str, Any], exponent: int, names: tuple[str, ...] = ()) -> dict[str, Any]:
    """The floating-point tensors (those in `names`, if given) times 2^exponent; the rest as they are."""
    return {k: (v * 2.0**exponent if torch.is_tensor(v) and v.is_floating_point() and (not names or k in names)
                else v) for k, v in inputs.items()}


def large_exponent(family: Any, case: Any, inputs: dict[str, Any], grad_out: Any,
                   rounded: Callable[[dict], dict]) -> int:
    """The exponent for the case (searched once per case in this process). `inputs` are a first-kind
    draw in float32; `rounded(inputs)` rounds them to the case's precision."""
    key = (family.name, case.key)
    if key not in _exponents:
        _exponents[key] = _search(family, case, inputs, grad_out, rounded)
    return _exponents[key]


def _search(family: Any, case: Any, inputs: dict[str, Any], grad_out: Any, rounded: Callable[[dict], dict]) -> int:
    names = tuple(family.large_inputs)
    limit = torch.finfo(getattr(torch, case.dtype)).max / 2.0**HEADROOM[case.dtype]
    biggest = max((float(v.abs().max()) for k, v in inputs.items() if torch.is_tensor(v) and v.is_floating_point()
                   and v.numel() and (not names or k in names)), default=1.0)

    def fine(exponent: int) -> bool:
        # a bit to spare: another draw at this scale can hold a larger value than this one
        return honest_can_pass(family, case, rounded(scaled(inputs, exponent, names)), grad_out, margin_bits=1)

    # the largest exponent found fine, taken as monotone above the family's own scale (where a sum's
    # cancellation can still cost digits); only an exponent that was checked is returned
    low, high, found = 0, max(0, math.floor(math.log2(limit / max(biggest, 1e-30)))), 0
    guess = _estimate(family, case, inputs, grad_out, rounded, names, limit, high)
    if guess is not None and fine(guess):
        # the outputs grow as a power of the scale: the guess is the top unless one more step is
        # fine too (an intermediate, not an output, limited it), and then the search goes on above
        if guess >= high or not fine(guess + 1):
            return guess
        low = found = guess + 1
    elif guess is not None:
        high = guess - 1  # an intermediate overflows before the outputs do: search below
    while low < high:
        middle = (low + high + 1) // 2
        if fine(middle):
            low = found = middle
        else:
            high = middle - 1
    return found


def _estimate(family: Any, case: Any, inputs: dict[str, Any], grad_out: Any, rounded: Callable[[dict], dict],
              names: tuple[str, ...], limit: float, high: int) -> Optional[int]:
    """Where the float32 reference's largest output would reach `limit` (with one bit to spare), from
    its outputs at scales 2^0 and 2^4: outputs of a product of d scaled inputs grow as 2^(d·e). Two
    float32 calls instead of a search's dozen; `_search` checks the guess. None when it cannot tell."""

    def largest(exponent: int) -> Optional[float]:
        as_float32 = {k: (v.float() if torch.is_tensor(v) and v.is_floating_point() else v)
                      for k, v in rounded(scaled(inputs, exponent, names)).items()}
        with torch.enable_grad():
            got = make_workload(family.reference, as_float32, case.direction, family.grad_inputs,
                                None if grad_out is None else grad_out.float()).results()
        values = [float(v.detach().abs().max()) for v in got.values() if torch.is_tensor(v) and v.numel()]
        return max(values) if values and all(math.isfinite(v) for v in values) else None

    probe = min(4, high)
    if probe < 1:
        return None
    at0, atp = largest(0), largest(probe)
    if not at0 or not atp or atp <= at0:
        return None
    growth = math.log2(atp / at0) / probe  # output bits per input bit
    return max(0, min(high, math.floor((math.log2(limit / 2) - math.log2(at0)) / growth)))
