"""One judged call taken: the subject process poisons its outputs' memory, the judge writes the draw, the
subject makes the call, and the judge takes what it did at once and judges it later (`settle`). A mixin
of the judge's Session (cudabench.measure.judge)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from cudabench.measure.check import compare
from cudabench.measure.integrity_pass import described
from cudabench.measure.judged_calls import SubjectLost
from cudabench.measure.lanes import Draw, Taken, lane_outputs
from cudabench.results.records.model import Check, IntegrityCheck


class TakenCalls:
    """Taking and settling judged calls (mixed into cudabench.measure.judge.Session)."""

    lanes: Any

    def judged_call(self, draw: Draw, reference: Optional[dict], keep_outputs: bool = False, eager: bool = False,
                    tolerance: Optional[float] = None, same: bool = False,
                    every_lane: bool = False) -> tuple[Check, list[IntegrityCheck]]:
        """One judged call taken and settled at once (`take`, `settle`)."""
        taken = self.take(draw, eager=eager, same=same)
        if keep_outputs and not taken.problems:
            self.first_outputs = taken.got[taken.lane]
        return self.settle(taken, reference, tolerance, every_lane)

    def take(self, draw: Optional[Draw], eager: bool = False, same: bool = False,
             meanwhile: Optional[Callable[[], Draw]] = None) -> Taken:
        """Poison the outputs' memory, write the draw, make one call, and take what it did: its outputs
        (every lane's, cloned here), what they may not be (kinds, aliasing, lanes sharing memory) and
        whether it changed its inputs. Every call is taken alike, checked or not: what the judge does
        right after a call cannot tell the subject which calls it reads (`settle` reads them later). A
        graph replay with lanes gets the draw in a lane picked at random and new values (or on `same`
        their last ones) in the others (cudabench.measure.lanes). `meanwhile`: the judge's own work
        done while the subject process poisons (a new draw); `draw` None: the draw it returns."""
        lanes = None if eager else self.lanes  # drawn before the subject is asked anything: alike for all
        if lanes is not None and meanwhile is not None:
            made, meanwhile = meanwhile(), None
            draw = made if draw is None else draw
        lane = lanes.pick(draw, same, self.new_draw) if lanes is not None else 0
        if meanwhile is None:
            self.ask({"op": "poison"})
        else:
            made = self.ask_while({"op": "poison"}, meanwhile)[1]
            draw = made if draw is None else draw
        if draw is None:
            raise ValueError("a judged call needs its values, or a draw to make them meanwhile")
        if lanes is not None:
            lanes.write()
            self.judge.sync()
        elif self.case.direction == "bwd":  # the stored forward first, then the gradient its backward gets
            self.write(draw, grad=False)
            self.ask({"op": "forward", "eager": eager} if eager else {"op": "forward"})
            self.write(draw, inputs=False)
        else:
            self.write(draw)
        reply = self.ask({"op": "call", "eager": eager} if eager else {"op": "call"})
        self.last_sample = reply.get("sample")
        held = lanes.held if lanes is not None else [draw]
        got, problems, pending = [], [], []
        for i, values in enumerate(held):
            outputs = reply["outputs"] if lanes is None else lane_outputs(reply, i, lanes.count)
            if outputs is None:
                raise SubjectLost("the subject process broke the protocol: a replay without every call's outputs")
            opened, found = self._open_outputs(outputs, i)
            problems += found
            if not found:
                pending.append(self._mutation_counts(values, i))
            got.append({k: t.clone() for k, t in opened.items()})
        self.judge.sync()  # the clones made and the inputs compared: one synchronisation a call
        for mutated in filter(None, map(described, pending)):
            problems.append(IntegrityCheck("inputs", "fail", f"it mutates its inputs: {mutated}"))
        if lanes is not None and not problems:
            problems = self._lanes_apart(reply)
        return Taken(lane, got, list(held), problems, draw)

    def settle(self, taken: Taken, reference: Optional[dict], tolerance: Optional[float] = None,
               every_lane: bool = False) -> tuple[Check, list[IntegrityCheck]]:
        """A taken call judged: its lane's outputs against `reference` (to `tolerance`, by default the
        family's), with `every_lane` each other lane's too against its own values' reference (the worst
        lane's check is the call's); unread without a reference or with problems."""
        if reference is None or taken.problems:
            return Check((), self.tolerance), taken.problems
        check = compare(taken.got[taken.lane], reference, self.tolerance if tolerance is None else tolerance)
        if every_lane:
            check = self._every_lane(taken, check)
        return check, []
