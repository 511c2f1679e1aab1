"""The input values the judge writes (`Draw`), and the lanes of a graph: under graph timing (fwd, fwdbwd)
each of a replay's n calls reads inputs of its own and writes outputs of its own.

Why: a replay is timed as a whole and divided by n. Were its calls to share inputs, the first could
compute and the others copy it, or all could return one buffer, or (a counter in device memory telling
each call its place) all but the call whose outputs are read could skip their work, with right outputs
wherever the judge looks. So the subject process makes n - 1 more sets of inputs (lane 0 is the subject's
own), the graph captures call i on lane i, and before each judged replay the judge writes values of its
own drawing into every lane, new ones into all of them or each lane's last ones again. It checks the
outputs of one lane it picks at random in its own process, after the replay, so nothing of the pick
reaches the subject's code, and every lane's memory must be its own. A graph holds no more lanes than
fit a quarter of the L2 together (`room`): the hot loop's calls then find their inputs in the L2 as a
single call's do under the other timers. On the H100, lanes filling all of its 50 MB ran timex-v4 at
B=8 C=64 T=256 22 % slower than one set of inputs (34 lanes of 1 MB), and add2 at 2^20 (4 lanes of 12 MB)
at DRAM speed, where one set of inputs and the events timer see the L2's (docs/benchmarks/h100-timing-truth.md)."""

from __future__ import annotations

import math
import secrets
from typing import Any, Callable, Optional

import torch

from cudabench.measure.transport import open_shared, share


class Draw:
    """One set of input values the judge made and wrote into the subject's inputs."""

    def __init__(self, seed: int, inputs: dict, grad_out: Any) -> None:
        self.seed, self.inputs, self.grad_out = seed, inputs, grad_out


class Taken:
    """A judged call as the judge took it right after it ran: the lane it reads, every lane's outputs
    (cloned in the judge's memory), the values each lane held, what was wrong with the call, and the
    values it was given: the new draw (in the lane it reads), or on a same step the values written again."""

    def __init__(self, lane: int, got: list[dict], held: list[Draw], problems: list, drawn: Draw) -> None:
        self.lane, self.got, self.held, self.problems, self.drawn = lane, got, held, problems, drawn


# ---- the subject process's side ------------------------------------------------------------------------

def footprint(inputs: dict, grad_out: Any, outputs: list) -> int:
    """Bytes one call reads and writes: its inputs, upstream gradient and outputs ([(shape, dtype)])."""
    tensors = [v for v in inputs.values() if torch.is_tensor(v)] + ([grad_out] if grad_out is not None else [])
    size = sum(t.numel() * t.element_size() for t in tensors)
    for shape, dtype in outputs:
        size += math.prod(int(d) for d in shape) * getattr(torch, dtype).itemsize
    return size


L2_SHARE = 4  # lanes fit 1 / L2_SHARE of the L2 together


def room(one_call: int, l2: int) -> int:
    """How many lanes fit their share of an L2 of `l2` bytes: at least one."""
    return max(1, l2 // L2_SHARE // max(1, one_call))


def lane_seeds(seed: int, count: int) -> list[int]:
    """The seeds of lanes 1 .. count-1's first values (lane 0 holds the subject's own inputs)."""
    return [(seed * 0x9E3779B1 + 0x1A4E * i) % (1 << 62) for i in range(1, count)]


def shared_lanes(lanes: list[tuple[dict, Any]]) -> list[dict]:
    """Lanes 1.. as the judge maps them."""
    return [{"inputs": {k: share(v) for k, v in inputs.items() if torch.is_tensor(v)},
             "grad_out": None if grad is None else share(grad)} for inputs, grad in lanes]


# ---- the judge's side ------------------------------------------------------------------------------------

class Lanes:
    """A graph's lanes as the judge holds them: each lane's input memory mapped here (lane 0's is the
    subject's own inputs) and the values each holds now."""

    def __init__(self, first: tuple[dict, Any], shared: list[dict], held: list[Draw]) -> None:
        self.mapped: list[tuple[dict, Any]] = [first]
        for lane in shared:
            self.mapped.append(({k: open_shared(m) for k, m in lane["inputs"].items()},
                                open_shared(lane["grad_out"]) if lane.get("grad_out") else None))
        self.held = held  # what each lane holds: lane 0 the subject's inputs, the others drawn from lane_seeds

    @property
    def count(self) -> int:
        return len(self.mapped)

    def unlike(self) -> str:
        """What is wrong with the lanes the subject process shared ('' when nothing): each must hold the
        same inputs as lane 0 (names, shapes, dtypes), and no two lanes may share memory."""
        names, grad = self.mapped[0][0], self.mapped[0][1]
        for i, (inputs, g) in enumerate(self.mapped[1:], 1):
            if inputs.keys() != names.keys() or (g is None) != (grad is None) or any(
                    _unlike(t, names[k]) for k, t in inputs.items()) or (g is not None and _unlike(g, grad)):
                return f"lane {i} of the graph's inputs is not shaped like the subject's own"
        return overlap([[t for t in [*inputs.values(), g] if t is not None] for inputs, g in self.mapped])

    def pick(self, draw: Draw, same: bool, fresh: Callable[[], Draw]) -> int:
        """The values of the next judged replay, chosen before the subject is asked anything: on `same`,
        each lane's last values again; else `draw` in a lane picked at random and values of `fresh` in the
        others. Returns the lane whose outputs are read (the one `draw` goes into)."""
        lane = secrets.randbelow(self.count)
        if not same:
            self.held = [draw if i == lane else fresh() for i in range(self.count)]
        return lane

    def write(self) -> None:
        """Every lane's values into its memory."""
        for (inputs, grad), values in zip(self.mapped, self.held):
            write_lane(inputs, grad, values)

    def wrote(self, lane: int, draw: Draw) -> None:
        """A call outside the graph (eager) wrote `draw` into `lane`."""
        self.held[lane] = draw


def write_lane(mapped: dict, mapped_grad: Any, draw: Draw, inputs: bool = True, grad: bool = True) -> None:
    """`draw`'s values into one lane's memory (the subject's, mapped here)."""
    with torch.no_grad():
        if inputs:
            for k, t in mapped.items():
                t.copy_(draw.inputs[k])
        if mapped_grad is not None and grad:
            mapped_grad.copy_(draw.grad_out)


def overlap(groups: list[list[torch.Tensor]]) -> str:
    """'' when no memory of one group (a lane's inputs and outputs) is also another group's, else what
    overlaps. Within a group tensors may alias (autograd hands back the upstream gradient of a sum)."""
    spans = sorted((*memory_span(t), g) for g, ts in enumerate(groups) for t in ts if t.numel())
    top: list[tuple[int, int]] = []  # (end, group) of the two groups that reach furthest, furthest first
    for start, end, g in spans:
        if any(e > start for e, h in top if h != g):
            return "two calls of the graph share memory (inputs or outputs of one call are another's)"
        mine = max([(e, h) for e, h in top if h == g] + [(end, g)])
        top = sorted([x for x in top if x[1] != g] + [mine], reverse=True)[:2]
    return ""


def lane_outputs(reply: dict, lane: int, count: int) -> Optional[dict]:
    """The shared outputs of `lane` in a judged replay's reply (None when the reply lacks lanes)."""
    if lane == 0:
        return reply["outputs"]
    lanes = reply.get("lanes")
    if not isinstance(lanes, list) or len(lanes) != count - 1:
        return None
    return lanes[lane - 1]


def _unlike(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape != b.shape or a.dtype != b.dtype or a.device != b.device


def memory_span(t: torch.Tensor) -> tuple[int, int]:
    """The addresses a tensor's elements lie in, [first, past its last element): the one definition of
    a tensor's memory for the checks that two tensors share none (an output aliasing an input, two
    calls of a graph sharing memory)."""
    start = t.data_ptr()
    return start, start + (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))) * t.element_size()


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    (a0, a1), (b0, b1) = memory_span(a), memory_span(b)
    return a0 < b1 and b0 < a1
