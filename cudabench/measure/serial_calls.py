"""Graph timing's floor (the integrity check serial-calls). A replay of n calls divided by n is one call's
latency only if the calls run one after another. A binding can make them overlap instead: fork each call
it captures onto a stream of its own, or have one call launch a kernel over every call's memory (it knows
them all by then). Every lane's outputs are right (cudabench.measure.lanes checks them) and the figure is
a throughput, up to n times too fast for a small call.

So the judge makes SERIAL_CALLS calls alone: eager (no graph, no lanes), on new values it draws, in one
CUPTI session, each checked against its fp64 reference, and holds the graph's figure per call to their
GPU busy time (integrity.serial_calls). Being checked, a call alone cannot do less than the op's work,
and CUPTI sees it on any stream. A failing verdict is put to a second round and stands only if that one
fails too, as the judged calls' timing verdicts are. A mixin of the judge's Session."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from cudabench.measure import integrity
from cudabench.measure.judged_calls import SubjectLost
from cudabench.results.records.model import IntegrityCheck, Result

if TYPE_CHECKING:
    from cudabench.measure.lanes import Lanes

SERIAL_CALLS = 3   # calls alone per round: the median of their busy time is the floor


class SerialCalls:
    lanes: Optional["Lanes"]
    last_sample: Optional[float]
    phases: Any
    judge: Any

    def serial_calls(self, result: Result) -> IntegrityCheck:
        if self.lanes is None:
            return IntegrityCheck("serial-calls", "not run", "one call a replay: no calls to overlap")
        first, timing = self._serial_round(result)
        if not first.failed or not timing:
            return first
        second, _ = self._serial_round(result)
        if second.failed:
            return IntegrityCheck("serial-calls", "fail", f"{second.detail}; again in a second round ({first.detail})")
        return IntegrityCheck("serial-calls", "pass", f"{second.detail}; in a second round (the first: {first.detail})")

    def _serial_round(self, result: Result) -> tuple[IntegrityCheck, bool]:
        """One round's verdict, and whether it is about timing (a wrong call alone stands at once)."""
        # the draws and their references before the first call, as in a round of judged calls
        with self.phases("integrity/references"):
            draws = [self._checked_draw(self.new_draw()) for _ in range(SERIAL_CALLS)]
        lanes, self.lanes = self.lanes, None  # a call alone: lane 0, no replay (BlindRunner.call)
        samples: list[Optional[float]] = []
        try:
            self.ask({"op": "round"})
            taken = []
            for draw, _, _ in draws:
                self.last_sample = None
                taken.append(self.take(draw))
                samples.append(self.last_sample)
            reply = self.ask({"op": "samples"})
        finally:
            self.lanes = lanes
        for (draw, reference, tolerance), t in zip(draws, taken):
            check, problems = self.settle(t, reference, tolerance)
            if problems:
                return IntegrityCheck("serial-calls", "fail", f"a call alone went wrong: {problems[0].detail}"), False
            if reference is not None and not check.passed:
                return IntegrityCheck("serial-calls", "fail", f"a call alone on new values was wrong: error "
                                                              f"{check.worst:.3g} > tolerance {check.tolerance:.3g}"), False
        busy = self._busy_alone(reply, samples)
        if any(b <= 0 for b in busy):
            return IntegrityCheck("serial-calls", "fail", "a call alone on new values kept the GPU busy 0 s: its "
                                                          "work ran where CUPTI does not see it"), False
        # a call whose draw could not be checked (no honest kernel held to it) is left out of the floor
        busy = [b for b, (_, reference, _) in zip(busy, draws) if reference is not None]
        return integrity.serial_calls(result.stats.median, busy, result.measurement.calls_per_sample), True

    def _busy_alone(self, reply: dict, samples: list[Optional[float]]) -> list[float]:
        """Each call alone's GPU busy time: CUPTI's, from the round's session (on the CPU, where there is
        none, the round's timer gave each call's sample in its reply). One per call, or the subject
        process broke the protocol: its own ranges or a round it ended itself would take the work away."""
        busy = reply.get("busy") if self.judge.device == "cuda" else samples
        if not isinstance(busy, list) or len(busy) != SERIAL_CALLS or any(b is None for b in busy):
            raise SubjectLost(f"the subject process timed {len(busy) if isinstance(busy, list) else 'none'} of "
                              f"{SERIAL_CALLS} calls alone")
        return [float(b) for b in busy]
