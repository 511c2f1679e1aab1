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


def _value(param: Param, rng: random.Random, top: int) -> int:
    low = param.minimum
    if param.minimum == 0 and param.default <= 1:  # a flag
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
    when the constraints leave few small shapes)."""
    found: list[dict[str, int]] = []
    for _ in range(TRIES):
        if len(found) >= count:
            break
        shape = {p.name: _value(p, rng, budget) for p in family.params}
        size = math.prod(v for p, v in zip(family.params, shape.values()) if not (p.minimum == 0 and p.default <= 1))
        if size > budget or shape in found or violation(family, variant, shape) is not None:
            continue
        found.append(shape)
    return found
