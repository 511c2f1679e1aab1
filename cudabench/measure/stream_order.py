"""The stream-order probe in the subject process (the judge's verdict: cudabench.measure.integrity_pass):
PyTorch's current stream held busy, the first inputs written back on it over the judge's new draw, one
call, its outputs copied on it. Only work ordered on the current stream sees the first inputs and is done
before the copies; work on another stream, started while the stream is held, reads the judge's draw."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from cudabench.measure.timers import sleep_cycles

# The stream is held at least this long, and at least ORDER_HOLD_TIMES an eager call (a warm-up call with
# its synchronize, at least the host's time to issue it; a backward's stored forward too, which the probe
# makes again) and a timed call: the write-back and the call must be queued while the stream is still held.
# The floor covers the host's own jitter (a page fault, the scheduler); the fixed 5 ms it replaces was
# 0.2 s of a 45-subject sweep, mostly an idle GPU.
ORDER_HOLD_FLOOR = 1e-3
ORDER_HOLD_TIMES = 3


def order_hold(hot_median: float, eager_seconds: float) -> float:
    """Seconds the probe holds the current stream before the write-back (at most 1 s)."""
    return min(1.0, max(ORDER_HOLD_FLOOR, ORDER_HOLD_TIMES * max(hot_median, eager_seconds)))


def eager_seconds(warmup_seconds: float, warmup_calls: int, forward: Any, sync: Callable[[], None]) -> float:
    """An eager call with its synchronize (the warm-up's mean), and for a backward its stored forward made
    once more and timed the same way (after the hot loop and the CUPTI pass: nothing timed follows)."""
    seconds = warmup_seconds / max(1, warmup_calls)
    if forward is not None:
        start = time.perf_counter()
        forward()
        sync()
        seconds += time.perf_counter() - start
    return seconds


def order_probe(s: Any, sync: Callable[[], None], on_gpu: bool) -> dict:
    """The probe on the open subject `s` (cudabench.measure.opened.Opened): the outputs, copied on the
    current stream."""
    hold = order_hold(s.hot_median, s.eager_seconds)
    sync()
    if on_gpu:
        torch.cuda._sleep(sleep_cycles(hold))
    with torch.no_grad():
        for k, v in s.pristine[0].items():
            s.inputs[k].copy_(v)
        if s.grad_out is not None:
            s.grad_out.copy_(s.pristine[1])
    got = s.workload().call()
    copies = {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in got.items()}
    sync()
    return copies
