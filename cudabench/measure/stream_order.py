"""The stream-order probe in the subject process (the judge's side: IntegrityPass.stream_order): PyTorch's
current stream held busy, the first inputs written back on it over the judge's new draw, one call, its
outputs copied on it. Only work ordered on the current stream sees the first inputs and is done before
the copies; work on another stream that starts while the stream is held reads the judge's draw.

That holds only if the write-back and the call were queued before the hold ended. The probe measures
how long they took to issue and says so; where the hold ran out first (a call slow to issue on the host,
a delay before its launches, a hiccup of the host), the judge asks again with a hold four times that
long. So the hold need not guess the host's time: three timed calls, at least 1 ms (the fixed 5 ms it
replaces was 0.2 s of a 45-subject sweep, mostly an idle GPU)."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

import torch

from cudabench.measure.timers import sleep_cycles

ORDER_HOLD_FLOOR = 1e-3
ORDER_HOLD_TIMES = 3
ORDER_HOLD_MOST = 1.0
ORDER_AGAIN_TIMES = 4  # a probe whose hold ran out before the call was issued: again, this many times longer


def order_hold(hot_median: float, asked: Optional[float] = None) -> float:
    """Seconds the probe holds the current stream: what the judge asked for, else ORDER_HOLD_TIMES timed
    calls and at least the floor; at most ORDER_HOLD_MOST."""
    hold = asked if asked is not None else max(ORDER_HOLD_FLOOR, ORDER_HOLD_TIMES * hot_median)
    return min(ORDER_HOLD_MOST, max(ORDER_HOLD_FLOOR, float(hold)))


def again_hold(issued: float, hold: float) -> Optional[float]:
    """The hold to ask for next when the write-back and the call took `issued` seconds to queue under a
    `hold` that may have run out first (None: it did not, the probe stands; also None at the cap)."""
    if issued < hold or hold >= ORDER_HOLD_MOST:
        return None
    return min(ORDER_HOLD_MOST, ORDER_AGAIN_TIMES * issued)


def order_probe(s: Any, sync: Callable[[], None], on_gpu: bool, asked: Optional[float] = None) -> tuple[dict, float, float]:
    """The probe on the open subject `s` (cudabench.measure.opened.Opened): (its outputs, copied on the
    current stream; the hold; the seconds from the hold's launch until the copies were queued)."""
    hold = order_hold(s.hot_median, asked)
    sync()
    start = time.perf_counter()
    if on_gpu:
        torch.cuda._sleep(sleep_cycles(hold))
    with torch.no_grad():
        for k, v in s.pristine[0].items():
            s.inputs[k].copy_(v)
        if s.grad_out is not None:
            s.grad_out.copy_(s.pristine[1])
    got = s.workload().call()
    copies = {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in got.items()}
    issued = time.perf_counter() - start
    sync()
    return copies, hold, issued
