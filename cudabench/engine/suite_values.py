"""The checks behind suite files (cudabench.engine.suite_file) and the options that share them
(--warmup): each wrong value is one ConfigError that names where it is, what was expected and what
was found."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, NoReturn, Optional, Sequence

from cudabench.errors import ConfigError
from cudabench.spec.shapes import LARGEST, parse_value

INT_TEXT = 'a positive integer (e.g. 768, "1_048_576" or "2^20")'
WARMUP = re.compile(r"^(?P<number>\d{1,12}(?:\.\d{1,12})?)\s*(?P<unit>ms|s)?$")
MAX_SECONDS = 86_400.0        # a day: any time setting beyond it is a slip
MAX_WARMUP_CALLS = 1_000_000
MISSING = object()

SHOWN = 200  # characters of a wrong value quoted in a message


def show(value: Any) -> str:
    """A wrong value as the file could write it, cut short: a message stays one paragraph."""
    if value is MISSING:
        return "nothing"
    try:
        text = json.dumps(value, default=str)
    except (RecursionError, ValueError):  # nested thousands deep; an integer past the digit limit
        text = f"a {type(value).__name__} too deep or too long to show"
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def fail(where: str, expected: str, got: Any = MISSING, hint: str = "") -> NoReturn:
    raise ConfigError(f"{where}: expected {expected}, got {show(got)}.", hint)


def suggest(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"Did you mean '{close[0]}'?" if close else ""


def check_keys(table: dict[str, Any], allowed: Sequence[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key '{key}'; expected one of {', '.join(allowed)}.",
                              suggest(key, allowed))


def positive_int(value: Any, where: str, expected: str = INT_TEXT, least: int = 1) -> int:
    number = value
    if isinstance(value, str):
        try:
            number = parse_value(value)
        except ValueError:
            fail(where, expected, value)
    if isinstance(number, bool) or not isinstance(number, int) or not least <= number <= LARGEST:
        fail(where, expected, value)  # at most 2^63, as a --shape value
    return number


def bounded(value: Any, where: str, kind: type, largest: float, unit: str) -> Any:
    """A positive int (kind int) or number (kind float) up to `largest`."""
    numeric = (int,) if kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, numeric) or value != value:
        fail(where, f"a positive {'integer' if kind is int else 'number'} ({unit})", value)
    if value <= 0:
        raise ConfigError(f"{where} must be positive (got {value:g}).")
    if value > largest:
        raise ConfigError(f"{where} must be at most {largest:g} {unit} (got {value:g}).")
    return kind(value)


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        fail(where, "true or false", value)
    return value


def choice(value: Any, allowed: Sequence[str], where: str) -> str:
    if value not in allowed:
        hint = suggest(value, allowed) if isinstance(value, str) else ""
        fail(where, f"one of {', '.join(allowed)}", value, hint)
    return value


def parse_warmup(value: Any, where: str = "--warmup") -> tuple[int, float]:
    """(calls, seconds): '25' (or 25) = 25 calls; '100ms' / '0.5s' = at least that long (and at
    least 3 calls)."""
    text = str(value).strip().lower() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    m = WARMUP.match(text)
    if not m:
        fail(where, 'a number of calls (25) or a duration ("100ms", "0.5s")', value)
    if m.group("unit") is None:
        number = float(m.group("number"))
        if not number.is_integer():
            fail(where, 'a whole number of calls (25) or a duration ("100ms", "0.5s")', value)
        return bounded(int(number), where, int, MAX_WARMUP_CALLS, "calls"), 0.0
    seconds = float(m.group("number")) / (1e3 if m.group("unit") == "ms" else 1.0)
    return 3, bounded(seconds, where, float, MAX_SECONDS, "seconds")


def warmup_text(value: Any, where: str) -> str:
    parse_warmup(value, where)
    return str(value).strip()


def names(value: Any, where: str, allowed: Optional[Sequence[str]] = None) -> tuple[str, ...]:
    """A list of non-empty strings (or one string), repeats dropped."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v.strip() for v in items):
        fail(where, 'a list of names such as ["timex-v4"]', value)
    names = [v.strip() for v in items]
    for i, name in enumerate(names, 1):
        if allowed is not None:
            choice(name, allowed, f"{where}[{i}]")
    return tuple(dict.fromkeys(names))
