"""Random shapes within a family's constraints, for checking a kernel away from the shapes it was tuned
on: small (cheap to check in fp64), and mostly ragged (odd sizes, one off a power of two), with
powers of two often enough that constraints such as T % 4 or D in (64, 128) are met."""

from __future__ import annotations

import math
import random
from typing import Optional

from cudabench.spec.family import Family, Param, Variant
from cudabench.spec.shapes import violation

BUDGET = 1 << 20   # the product of a shape's sizes at most this (flags such as causal not counted)
TRIES = 4000
RAGGED_STEP = 64   # how far the first random shape's sizes may move to become ragged


def _value(param: Param, rng: random.Random, top: int) -> int:
    low = param.minimum
    if _flag(param):
        return rng.randint(0, 1)
    high = max(low, max(1, min(param.default, top)))
    pick = rng.random()
    powers = [1 << p for p in range(max(0, math.ceil(math.log2(max(low, 1)))), int(math.log2(high)) + 1)
              if low <= 1 << p <= high]
    if pick < 0.3 and powers:
        return rng.choice(powers)
    if pick < 0.6 and powers:
        return min(high, max(low, rng.choice(powers) + rng.choice((-3, -1, 1, 3))))
    return min(high, max(low, round(math.exp(rng.uniform(math.log(max(low, 1)), math.log(high))))))


def random_shapes(family: Family, variant: Optional[Variant], count: int, rng: random.Random,
                  budget: int = BUDGET) -> list[dict[str, int]]:
    """Up to `count` distinct shapes that satisfy the family's and the variant's constraints (fewer
    when the constraints leave few small shapes). The first is made ragged in every size the
    constraints let be (`_ragged`: at most two factors of two more than the fewest allowed), so that a
    kernel right only at multiples of its tile (of 8 or more where a size may be odd) fails every time,
    not only when no draw happened to be one (two draws were both multiples of 1024 about one
    time in forty)."""
    found: list[dict[str, int]] = []
    for _ in range(TRIES):
        if len(found) >= count:
            break
        shape = {p.name: _value(p, rng, budget) for p in family.params}
        if _size(family, shape) > budget or shape in found or violation(family, variant, shape) is not None:
            continue
        found.append(_ragged(family, variant, shape, budget, rng) if not found else shape)
    return [s for i, s in enumerate(found) if s not in found[:i]]


def _ragged(family: Family, variant: Optional[Variant], shape: dict[str, int], budget: int,
            rng: random.Random) -> dict[str, int]:
    """`shape` with each size in turn moved by at most RAGGED_STEP to a value the constraints allow with
    few factors of two: the fewest any such value has, or one or two more, at random (always odd where
    odd is allowed would let a kernel be right at odd sizes and at whole tiles only)."""
    shape = dict(shape)
    for p in family.params:
        if _flag(p):
            continue
        allowed = [v for v in (shape[p.name] + d for d in sorted(range(-RAGGED_STEP, RAGGED_STEP + 1), key=abs))
                   if v >= max(p.minimum, 1) and _size(family, {**shape, p.name: v}) <= budget
                   and violation(family, variant, {**shape, p.name: v}) is None]
        if not allowed:
            continue
        target = min(_twos(v) for v in allowed) + rng.choice((0, 1, 2))
        shape[p.name] = next((v for v in allowed if _twos(v) == target),
                             min(allowed, key=lambda v: abs(_twos(v) - target)))
    return shape


def _flag(param: Param) -> bool:
    return param.minimum == 0 and param.default <= 1


def _size(family: Family, shape: dict[str, int]) -> int:
    return math.prod(v for p, v in zip(family.params, shape.values()) if not _flag(p))


def _twos(n: int) -> int:
    """The factors of two in a size."""
    return (n & -n).bit_length() - 1 if n > 0 else 0
