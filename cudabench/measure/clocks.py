"""Watching the GPU while it is measured: NVML clock, temperature and power readings before,
during (a background poll) and after a timed region, and the L2 flush used by cold timing.
Read-only: cudabench never changes clocks or power limits."""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field
from typing import Optional

from cudabench.device import ClockReading, read_clocks



@dataclass
class ClockMonitor:
    """Context manager: polls NVML every `interval` seconds on a thread while the block runs."""

    interval: float = 0.05
    before: Optional[ClockReading] = None
    after: Optional[ClockReading] = None
    during: list[ClockReading] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None

    def __enter__(self) -> "ClockMonitor":
        self.before = read_clocks()
        if self.before is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            reading = read_clocks()
            if reading is not None:
                self.during.append(reading)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.after = read_clocks()

    def pairs(self) -> tuple[tuple[str, float], ...]:
        """Flat readings for the results file."""
        out: list[tuple[str, float]] = []
        if self.before:
            out += self.before.as_pairs("before")
        if self.after:
            out += self.after.as_pairs("after")
        if self.during:
            sm = [r.sm_mhz for r in self.during]
            out += [("during_sm_mhz_median", statistics.median(sm)), ("during_sm_mhz_min", min(sm)),
                    ("during_readings", float(len(sm))),
                    ("during_power_w_max", max(r.power_w for r in self.during)),
                    ("during_temperature_c_max", max(r.temperature_c for r in self.during))]
        return tuple(out)




class L2Flusher:
    """Writes a buffer of twice the L2 size, so the next call finds nothing of its data in L2."""

    def __init__(self, l2_bytes: int) -> None:
        import torch

        self.bytes = 2 * max(l2_bytes, 1 << 20)
        self.buffer = torch.empty(self.bytes // 4, dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        self.buffer.fill_(1.0)
