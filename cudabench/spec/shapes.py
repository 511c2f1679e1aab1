"""Parsing `--shape B=32,C=768,T=768` and checking a shape against a family's constraints."""

from __future__ import annotations

import math
import re
from typing import Optional, Sequence

from cudabench.errors import ShapeError
from cudabench.spec.family import Family, Variant

_NUMBER = re.compile(r"^([+-]?)(\d+)(?:\s*(?:\^|\*\*)\s*(\d+))?$")
LARGEST = 2**63 - 1  # what a 64-bit index holds; far past any tensor a GPU can allocate


def parse_value(text: str) -> int:
    """An integer written plainly (768, -8), with underscores (1_048_576) or as a power (2^20, 2**20).
    ValueError for anything else, or for a value beyond ±LARGEST, which is refused before it is
    computed (10^100000000 would take minutes)."""
    m = _NUMBER.match(text.strip().replace("_", ""))
    if not m or len(m.group(2)) > 19:
        raise ValueError(text)
    sign, base, power = -1 if m.group(1) == "-" else 1, int(m.group(2)), m.group(3)
    if power is not None:
        if len(power) > 3 or (base > 1 and int(power) * math.log2(base) >= 63):
            raise ValueError(text)
        base **= int(power)
    if base > LARGEST:
        raise ValueError(text)
    return sign * base


def parse_shape(text: str) -> dict[str, int]:
    """'B=32,C=768,T=768' -> {'B': 32, 'C': 768, 'T': 768}; raises ShapeError naming the bad part."""
    shape: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ShapeError(f"Cannot read '{part}' in --shape '{text}'.",
                             "Write the shape as NAME=VALUE pairs, e.g. --shape B=32,C=768,T=768.")
        try:
            number = parse_value(value)
        except ValueError:
            raise ShapeError(f"'{value.strip()}' is not a whole number below 2^63 (in '{part}').",
                             "Values are integers such as 768, 1_048_576 or 2^20.") from None
        if number < 0:
            raise ShapeError(f"{name} must not be negative (got {number}).")
        if name in shape:
            raise ShapeError(f"{name} is given twice in --shape '{text}'.")
        shape[name] = number
    return shape


def parse_shapes(texts: Optional[Sequence[str]]) -> list[dict[str, int]]:
    """Each --shape given (run and check take several, one case each), in order, a repeat counted once;
    none given: [{}], the families' defaults."""
    shapes: list[dict[str, int]] = []
    for text in texts or [""]:
        shape = parse_shape(text)
        if shape not in shapes:
            shapes.append(shape)
    return shapes


def complete_shape(family: Family, given: dict[str, int]) -> dict[str, int]:
    """The family's defaults overridden by `given`; unknown parameter names are an error."""
    known = [p.name for p in family.params]
    unknown = [k for k in given if k not in known]
    if unknown:
        raise ShapeError(f"{family.name} has no shape parameter {', '.join(unknown)}.",
                         f"Its parameters are {', '.join(known)} "
                         f"(defaults {format_shape(family.default_shape())}).")
    for param in family.params:
        value = given.get(param.name, param.minimum)
        if value < param.minimum:
            need = "positive" if param.minimum == 1 else f"at least {param.minimum}"
            raise ShapeError(f"{param.name} must be {need} (got {value}).")
    return {name: given.get(name, family.default_shape()[name]) for name in known}


def violation(family: Family, variant: Optional[Variant], shape: dict[str, int]) -> Optional[str]:
    """The first broken constraint's message, or None when the shape is fine for this variant."""
    rules = list(family.constraints) + (list(variant.constraints) if variant else [])
    for rule in rules:
        message = rule.violation(shape)
        if message:
            return message
    return None


def check_shape(family: Family, variant: Optional[Variant], shape: dict[str, int]) -> None:
    message = violation(family, variant, shape)
    if message:
        who = variant.name if variant else family.name
        raise ShapeError(f"{who} cannot run at {format_shape(shape)}: {message}.",
                         "Pick a shape that satisfies the rule; `cudabench list` shows each kernel's constraints.")


def format_shape(shape: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in shape.items())
