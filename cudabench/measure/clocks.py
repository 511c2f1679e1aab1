"""Watching the GPU while it is measured: NVML clock, temperature and power readings before,
during (a background poll) and after a timed region, and the L2 flush used by cold timing.
Read-only: cudabench never changes clocks or power limits."""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Sequence

from cudabench.device import ClockReading, nvml_device, read_clocks
from cudabench.results.records.model import THROTTLE_REASONS, Measurement, SampleClocks



@dataclass
class ClockMonitor:
    """Context manager: NVML readings as the block starts, every `interval` seconds on a thread while it
    runs, and as it ends. The device and its maximum clock are found once, before the block: a timed
    block's first calls estimate the call (how many calls a graph holds, how long a sleep hides a launch),
    and a thread doing NVML's Python work beside them holds the GIL they wait for (on two H200s an honest
    graph then held 7 calls where the integrity test needs more than 8)."""

    interval: float = 0.05
    before: Optional[ClockReading] = None
    after: Optional[ClockReading] = None
    during: list[ClockReading] = field(default_factory=list)
    times: list[float] = field(default_factory=list)      # perf_counter of each reading in `during`
    batches: list[tuple[int, int, float]] = field(default_factory=list)  # (first sample, count, end)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None
    _device: Any = None                                   # nvml_device()

    def __enter__(self) -> "ClockMonitor":
        self._device = nvml_device()
        self.before = read_clocks(device=self._device) if self._device is not None else None
        if self.before is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            reading = read_clocks(device=self._device)
            if reading is not None:
                self.times.append(time.perf_counter())
                self.during.append(reading)

    def mark(self, first: int, count: int) -> None:
        """A batch of samples has just been taken (measure's on_batch)."""
        self.batches.append((first, count, time.perf_counter()))

    def applied(self, m: Measurement) -> Measurement:
        """`m` with the readings, each batch's clocks, and its throttled samples left out."""
        kept, throttled, clocks = split_throttled(m.samples, self.batches, list(zip(self.times, self.during)))
        return replace(m, samples=kept, throttled_samples=throttled, sample_clocks=clocks, clocks=self.pairs())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._device is not None:
            self.after = read_clocks(device=self._device)

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


def l2_bytes() -> int:
    """The current GPU's L2 size in bytes (0 when torch does not say)."""
    import torch

    return int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0))


class L2Flusher:
    """Writes a buffer of twice the L2 size, so the next call finds nothing of its data in L2."""

    def __init__(self, l2_bytes: int) -> None:
        import torch

        self.bytes = 2 * max(l2_bytes, 1 << 20)
        self.buffer = torch.empty(self.bytes // 4, dtype=torch.float32, device="cuda")

    def __call__(self) -> None:
        self.buffer.fill_(1.0)


THROTTLE_MASK = sum(THROTTLE_REASONS)  # a power cap, thermal limit, hardware slowdown or power brake


def split_throttled(samples: Sequence[float], batches: Sequence[tuple[int, int, float]],
                    readings: Sequence[tuple[float, Any]]) -> tuple[tuple[float, ...], tuple[float, ...],
                                                                    tuple[SampleClocks, ...]]:
    """(kept samples, samples left out as throttled, the clocks of each run of samples). `batches`:
    (first sample, count, perf_counter at its end), in the order taken; `readings`: (perf_counter,
    ClockReading) from the poll, in time order. Each batch takes the reading nearest its end, and
    consecutive batches that took the same reading are one run: a timer of one call per batch takes
    a thousand batches a subject, and the poll a reading every 50 ms (a record per batch was 100 KB
    of every hot reply). Where every sample was throttled, all are kept (there is nothing else to
    report) and the clocks say so."""
    if not readings or not batches:
        return tuple(samples), (), ()
    runs: list[list] = []  # [first, count, reading index]
    nearest = 0
    for first, count, end in batches:
        count = min(count, len(samples) - first)
        if count <= 0:
            continue
        while nearest + 1 < len(readings) and abs(readings[nearest + 1][0] - end) < abs(readings[nearest][0] - end):
            nearest += 1
        if runs and runs[-1][2] == nearest and runs[-1][0] + runs[-1][1] == first:
            runs[-1][1] += count
        else:
            runs.append([first, count, nearest])
    clocks = []
    for first, count, index in runs:
        reading = readings[index][1]
        reasons = int(getattr(reading, "reasons", 0))
        clocks.append(SampleClocks(first, count, float(reading.sm_mhz), reasons, bool(reasons & THROTTLE_MASK)))
    throttled = {i for c in clocks if c.throttled for i in range(c.first, c.first + c.count)}
    if len(throttled) == len(samples):
        return tuple(samples), (), tuple(clocks)
    kept = tuple(s for i, s in enumerate(samples) if i not in throttled)
    return kept, tuple(s for i, s in enumerate(samples) if i in throttled), tuple(clocks)


SETTLE_SECONDS = 100e-6  # the GPU kept busy this long before a judged call


def settle_hook(device: str, flush: Optional[Callable[[], None]]) -> Optional[Callable[[], None]]:
    """Before a judged call: the GPU kept busy for a moment (it has been idle while the judge wrote
    the inputs, as it never is in the hot loop), then the cold flush if cold."""
    if device != "cuda":
        return flush
    import torch  # a GPU process only: reading clocks needs no torch

    from cudabench.measure.timers import sleep_cycles

    sleep, cycles = torch.cuda._sleep, sleep_cycles(SETTLE_SECONDS)

    def before_each() -> None:
        sleep(cycles)
        if flush is not None:
            flush()

    return before_each


def cold_hook(flusher: "L2Flusher", guard: Any) -> Callable[[], None]:
    """Before a cold timed call: persisting L2 lines reset (whatever the subject set: no line may
    survive the flush), then L2 flushed."""
    def before_each() -> None:
        guard.clear_persisting_l2()
        flusher()

    return before_each
