"""How figures read in every table and export: times, byte counts, precisions, errors."""

from __future__ import annotations

import math
from typing import Optional


def fmt_time(seconds: Optional[float]) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    us = seconds * 1e6
    if us < 10:
        return f"{us:.2f} µs"
    if us < 1000:
        return f"{us:.1f} µs"
    if us < 1e6:
        return f"{us / 1e3:.3f} ms" if us < 1e4 else f"{us / 1e3:.2f} ms"
    return f"{seconds:.3f} s"


def fmt_bytes(count: Optional[float]) -> str:
    """Bytes in binary units, three figures: 0 B, 512 B, 1.50 KiB, 96.0 MiB, 300 MiB, 1.25 GiB ('-' when
    unknown)."""
    if count is None or count < 0:
        return "-"
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            value = count / size
            return f"{value:.{2 if value < 10 else 1 if value < 100 else 0}f} {unit}"
    return f"{count:.0f} B"


def fmt_decimal_bytes(count: int) -> str:
    """Sizes as users write copies: 4096 B, 1 MB, 256 MB, 1.5 GB (powers of 1000)."""
    for unit, size in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} B"


def fmt_share(value: float) -> str:
    """A relative precision such as ±0.12 %; '-' where unknown."""
    return f"±{value:.2%}" if math.isfinite(value) else "-"


def fmt_error(value: float) -> str:
    return "NaN" if value != value else f"{value:.1e}"
