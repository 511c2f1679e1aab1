"""The judged calls after the hot loop (cudabench.measure.judge, step 4): rounds of calls timed like
the hot loop on input values the judge draws and writes, in an order only it knows; which of them it
checks against a new fp64 reference, on another input kind, or for determinism; and the timing
verdicts (fresh-inputs, hot-loop) with their second round. A mixin of the judge's Session."""

from __future__ import annotations

import math
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional

from cudabench.errors import CudabenchError
from cudabench.measure import integrity
from cudabench.measure.rounds import Prepared, Round, confirmed, dedupe
from cudabench.results.records.model import Case, Check, IntegrityCheck, Result
from cudabench.results.records.stats import summarize
from cudabench.spec.family import UNIT_ROUNDOFF, Family

if TYPE_CHECKING:
    from cudabench.measure.lanes import Draw

# Judged calls on new values after the hot loop, and on the last values written again: six of each (eight until
# 2026-11-28), five or six timed a side besides another kind's call and the repeat. A cache's faster calls show
# in a median of five as in one of seven; the honest ratios seen with seven (below) leave the slack room.
NEW_DRAWS = 6
SAME_DRAWS = 6
FRESH_CALLS = NEW_DRAWS + SAME_DRAWS
# New draws checked against a new fp64 reference each, all but two: fewer than half the timed new calls go unread,
# so a cache cannot make their median fast by skipping work on unread ones (two of eight read: 1 in 40-60 passed).
CHECKED_DRAWS = NEW_DRAWS - 2
KIND_DRAWS = 3         # draws of another kind tried where a lower precision's rounding puts one out of reach
# Judged calls on new values slower than those on the same values by more than this share (plus twice the
# call's own spread, capped: integrity.NOISE_CAP) and an absolute allowance: the time depends on the inputs
# staying the same. Seen on the H100 over 103 honest subjects of the shipped suites: new / same 0.98 .. 1.03.
FRESH_SLACK = 0.10
FRESH_ABSOLUTE = {"sync": 5e-6}  # seconds; 1 µs under the GPU timers
# The hot loop faster than judged calls on the same values by more than this: the hot loop is not what the
# judged calls saw (seen: same / hot 0.99 .. 1.07). Under sync a judged call's wall time also pays the host's
# first launch after a pause, which the hot loop never does.
HOT_SLACK = 0.10
HOT_ABSOLUTE = {"sync": 30e-6}   # wall time: the host's first launch after a pause (seen: +27 µs)
HOT_ABSOLUTE_GPU = 3e-6          # events, graph, cupti: GPU time (seen: within 7 %)
HOST_BOUND = 0.5                 # GPU busy below this share of an events figure: judged calls timed by CUPTI
# Under sync, a call whose GPU is busy less than this share of its figure has its judged calls timed by kernel
# time: the host's part of its figure (launches, autograd) is slower after the judge's pause by more than
# HOT_SLACK. On the H200's host an honest attn-flash1 fwd+bwd took 370-425 µs in the hot loop, 590-644 µs in
# judged calls: kernel time 299 and 300 µs.
SYNC_HOST_SHARE = 0.9


class SubjectLost(Exception):
    """The subject process died, hung or broke the protocol; `reason` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SubjectError(CudabenchError):
    """The subject process answered a request with an error (a binding's TORCH_CHECK, a CUDA error)."""

    def __init__(self, message: str, skip: bool = False, stale: bool = False) -> None:
        super().__init__(message)
        self.skip = skip
        self.stale = stale  # the process could not serve the subject for what came before it: replaced


class JudgedCalls:
    """The judged calls of one subject (mixed into cudabench.measure.judge.Session)."""

    def fresh_calls(self, result: Result) -> list[IntegrityCheck]:
        """Judged calls after the hot loop, timed like it: NEW_DRAWS on new input values and SAME_DRAWS
        on the values of the call before written again (a cache of one entry hits on them, as in the
        hot loop, and misses on new ones), in an order only the judge knows. It checks CHECKED_DRAWS of
        the new ones against a new fp64 reference, one more new one drawn from another input kind
        (picked at random, named in the verdict), and one of the same ones against the first check's
        outputs (determinism). New and same are made the same way, so their medians differ only if
        the subject's time depends on its inputs staying the same.

        A timing verdict that fails is put to a second round made like the first (its checked calls
        read too, so a subject that tells the rounds apart cannot skip its work in the second): it
        stands only if that round fails one too. A pause before judged calls can slow an honest small
        call by more than the slack once in a while; a cache is slow on new values every time, and one
        that stops caching in the second round fails the hot-loop check."""
        prepared, self.prepared = self.prepared, None
        if prepared is None:
            prepared = Prepared(self._other_kind())
        kind, kind_draw, kind_reference, kind_tolerance, why_not = prepared.kind
        first = self._round(self._plan(with_kind=kind is not None), kind_draw, kind_reference, kind_tolerance,
                            prepared.checked)
        timing = self._timing_verdicts(first.samples, result)
        problems, errors = first.problems, first.errors
        if any(c.failed for c in timing):
            second = self._round(self._plan(), None, None)
            errors = errors + second.errors
            timing = confirmed(timing, self._timing_verdicts(second.samples, result))
            problems = problems + second.problems
        out = [self._fresh_verdict(errors, result), *timing, self._determinism(first.repeat),
               integrity.distribution(kind, first.kind_check, why_not, self.family.tolerance_for(self.case.dtype),
                                      self._summed(kind))]
        return out + dedupe(problems)

    prepared: Optional[Prepared] = None

    def prepare_calls(self) -> None:
        """The first round's draws and their fp64 references, made before the subject's first call: the
        judge makes them while the subject process opens the subject, which they do not depend on (the
        values stay secret; no call can tell them apart from the round's own). Leaving the phase synchronises:
        none of it is still on the GPU when the subject is answered. Should one fail, the round makes them
        itself, as it always did, and fails there."""
        try:
            kind = self._other_kind()
            with self.phases("integrity/references"):
                checked = self._checked_draws(CHECKED_DRAWS)
        except Exception:  # noqa: BLE001 - made again, and raised, where the round needs them
            self.prepared = None
            return
        self.prepared = Prepared(kind, checked)

    def _summed(self, kind: Optional[str]) -> float:
        from cudabench.measure.kinds import held_to
        return held_to(self.family, replace(self.case, inputs=kind)) if kind else math.inf

    def _plan(self, with_kind: bool = False) -> list[str]:
        """A round's steps in an order only the judge knows: "new", "same", CHECKED_DRAWS "checked"
        new ones, one "kind" (when another kind can be drawn) and one "repeat" (a same one on the
        first values)."""
        rng = self.judge._rng
        plan = ["new"] * NEW_DRAWS + ["same"] * SAME_DRAWS
        rng.shuffle(plan)
        places = rng.sample([i for i, k in enumerate(plan) if k == "new"], CHECKED_DRAWS + 1)
        for p in places[:-1]:
            plan[p] = "checked"
        if with_kind:
            plan[places[-1]] = "kind"
        plan[rng.choice([i for i, k in enumerate(plan) if k == "same"])] = "repeat"
        return plan

    def _round(self, plan: list[str], kind_draw: Optional[Draw], kind_reference: Optional[dict],
               kind_tolerance: Optional[float] = None, checked: Optional[list] = None) -> Round:
        j, family, case = self.judge, self.family, self.case
        found = Round()
        # an eager repeat under graph timing: see BlindRunner.call
        eager_repeat = self.settings.timing == "graph"
        previous = self.first  # the values of the subject's last call (the hot loop's)
        by_kernel_time = self.judged_timing == "cupti"
        if by_kernel_time:
            self.ask({"op": "round"})
        timed: list[tuple[str, Optional[float]]] = []
        read: list[tuple[str, Any, dict, Optional[float]]] = []  # the calls whose outputs are read
        # the checked draws and their references before the first call: a pause to compute one right
        # before a call would tell the subject (a kernel reading the GPU's clock) which calls are read
        with self.phases("integrity/references"):
            if checked is None:
                checked = self._checked_draws(plan.count("checked"))
            repeat = j.reference(family, case, self.first, keep=self.keep_reference) if "repeat" in plan else None
        for step in plan:
            fresh = step in ("new", "checked", "kind")
            draw, reference, tolerance = previous, None, None  # "same": the last call's values, written again
            # a new call's values are drawn while the subject process poisons; a checked call draws too, and
            # drops it: every new call pauses alike
            meanwhile = self.new_draw if step in ("new", "checked") else None
            if step == "new":
                draw = None
            elif step == "kind":
                draw, reference, tolerance = kind_draw, kind_reference, kind_tolerance
            elif step == "checked":
                draw, reference, tolerance = checked.pop()
            elif step == "repeat":
                draw, reference = self.first, repeat
            self.last_sample = None
            taken = self.take(draw, eager=eager_repeat and step == "repeat", same=not fresh, meanwhile=meanwhile)
            previous = taken.drawn
            found.problems += taken.problems
            timed.append(("new" if fresh else "same", self.last_sample))
            if reference is not None:
                read.append((step, taken, reference, tolerance))
        # read after the round: a call read at once would be followed by a longer pause than the others
        for step, taken, reference, tolerance in read:
            check, problems = self.settle(taken, reference, tolerance, every_lane=step == "checked")
            if problems:
                continue
            if step == "kind":
                found.kind_check = check
            else:
                found.errors.append(check)
            if step == "repeat":
                found.repeat = taken.got[taken.lane]
        if by_kernel_time:
            samples = self.ask({"op": "samples"})["samples"]
            if samples is not None:
                if len(samples) != len(timed):
                    raise SubjectLost(f"the subject process timed {len(samples)} of {len(timed)} judged calls")
                timed = [(kind, sample) for (kind, _), sample in zip(timed, samples)]
        # another kind may take another time; the repeat goes back to the first values (a miss for
        # a cache of one entry) and may be eager
        for (kind, sample), step in zip(timed, plan):
            if sample is not None and step not in ("kind", "repeat"):
                found.samples[kind].append(sample)
        return found

    def new_draw(self) -> Draw:
        """New values of the case's own kind, from a seed only the judge knows."""
        return self.judge.draw(self.family, self.case, secrets.randbits(62), self.first)

    def _checked_draws(self, count: int) -> list[tuple[Draw, Optional[dict], Optional[float]]]:
        """`count` new draws of the case's own kind with their references and tolerances (`_checked_draw`)."""
        return [self._checked_draw(self.new_draw()) for _ in range(count)]

    def _checked_draw(self, draw: Draw) -> tuple[Draw, Optional[dict], Optional[float]]:
        """A new draw of the case's own kind, its reference and tolerance: drawn again (KIND_DRAWS in all)
        while no honest kernel can be held to it (draw_tolerance inf); left unchecked after that."""
        j, family, case = self.judge, self.family, self.case
        for attempt in range(KIND_DRAWS):
            if attempt:
                draw = j.draw(family, case, secrets.randbits(62), self.first)
            reference = j.reference(family, case, draw, keep=False)
            tolerance = self.draw_tolerance(draw, reference)
            if math.isfinite(tolerance):
                return draw, reference, tolerance
        return draw, None, None

    def _timing_verdicts(self, samples: dict[str, list[float]], result: Result) -> list[IntegrityCheck]:
        return [self._fresh_figure(samples, result), self._hot_loop(samples["same"], result)]

    def _other_kind(self) -> tuple[Optional[str], Optional[Draw], Optional[dict], Optional[float], str]:
        """A kind other than the case's own, picked at random, with a draw of it, its fp64 reference and
        the tolerance the call is held to, for one judged call: the first kind whose draw an honest kernel
        can get right (kinds found ill-conditioned for the case are not tried again). A draw that only the
        rounding of a lower precision puts out of reach is drawn again (KIND_DRAWS in all), and its kind
        stays in play. None and why when there is none."""
        from cudabench.measure.kinds import honest_can_pass, rounding_allowance, widened

        if self.base.role != "variant":
            return None, None, None, None, "baselines are PyTorch's own"
        j, family, case = self.judge, self.family, self.case
        kinds = [k for k in other_input_kinds(family, case) if (case.key, k) not in j._ill_conditioned]
        j._rng.shuffle(kinds)
        if widened(family, case) and family.input_kinds[0] in kinds:
            # every draw of the case's own kind may be widened: one call is held to the family's first kind,
            # at its tolerance (a kernel that sums in the lower precision errs past it there)
            return self._first_kind()
        for kind in kinds:
            kind_case = replace(case, inputs=kind)
            for _ in range(KIND_DRAWS):
                with self.phases("integrity/references"):
                    draw = j.draw(family, kind_case, secrets.randbits(62), self.first)
                    reference = j.reference(family, kind_case, draw, keep=False)
                    if not honest_can_pass(family, kind_case, draw.inputs, draw.grad_out, reference):
                        j._ill_conditioned.add((case.key, kind))
                        break
                    tolerance = rounding_allowance(family, kind_case, draw.inputs, draw.grad_out, reference)
                if tolerance < float("inf"):
                    return kind, draw, reference, tolerance, ""
        return None, None, None, None, "no other input kind is one an honest kernel can get right at this case"

    def _first_kind(self) -> tuple[Optional[str], Optional[Draw], Optional[dict], Optional[float], str]:
        from cudabench.measure.kinds import held_to
        j, family, case = self.judge, self.family, self.case
        kind = family.input_kinds[0]
        kind_case = replace(case, inputs=kind)
        with self.phases("integrity/references"):
            draw = j.draw(family, kind_case, secrets.randbits(62), self.first)
            reference = j.reference(family, kind_case, draw, keep=False)
        return kind, draw, reference, held_to(family, kind_case), ""

    def _fresh_verdict(self, checks: list[Check], result: Result) -> IntegrityCheck:
        if not checks:
            return IntegrityCheck("fresh-output", "not run", "no judged call could be read")
        worst = max(checks, key=lambda c: (c.worst != c.worst, c.worst))
        if all(c.passed for c in checks):
            return IntegrityCheck("fresh-output", "pass", f"{len(checks)} timed calls checked, "
                                                          f"worst error {worst.worst:.1e}")
        return integrity.from_check("fresh-output", worst, result.check.worst, integrity.FRESH_WHAT)

    def _fresh_figure(self, samples: dict[str, list[float]], result: Result) -> IntegrityCheck:
        if min(len(samples["new"]), len(samples["same"])) < 3:
            return IntegrityCheck("fresh-inputs", "not run", "too few timed judged calls")
        check = integrity.fresh_inputs(summarize(samples["same"]), summarize(samples["new"]), FRESH_SLACK,
                                       FRESH_ABSOLUTE.get(self.judged_timing, 1e-6), self._hot(result).noise)
        return self._by_gpu_time(check)

    def _hot_loop(self, same: list[float], result: Result) -> IntegrityCheck:
        if len(same) < 3:
            return IntegrityCheck("hot-loop", "not run", "too few timed judged calls")
        absolute = HOT_ABSOLUTE.get(self.judged_timing, HOT_ABSOLUTE_GPU)
        return self._by_gpu_time(integrity.hot_loop(self._hot(result), summarize(same), HOT_SLACK, absolute))

    def _hot(self, result: Result) -> Any:
        """The hot loop's figures in the judged calls' unit: its timer's, or the CUPTI pass's kernel
        time for a host-bound call."""
        if self.judged_timing != self.settings.timing:
            return summarize(self.hot_kernel)
        return result.stats

    def _by_gpu_time(self, check: IntegrityCheck) -> IntegrityCheck:
        if self.judged_timing == self.settings.timing:
            return check
        return replace(check, detail=f"{check.detail}; kernel time (CUPTI), since the call is host-bound")

    def _determinism(self, repeat: Optional[dict]) -> IntegrityCheck:
        if repeat is None or not self.first_outputs:
            return IntegrityCheck("determinism", "not run", "the repeated call could not be read")
        allowed = self.subject_nondeterminism()
        return integrity.determinism(self.first_outputs, repeat, allowed)

    def subject_nondeterminism(self) -> float:
        """What the variant or baseline declares; in a lower precision two units of its roundoff more
        (one flipped rounding of a stored output)."""
        try:
            s = self.family.variant(self.base.subject) if self.base.role == "variant" \
                else self.family.baseline(self.base.subject)
        except KeyError:
            return 0.0
        declared = float(getattr(s, "nondeterminism", 0.0))
        if declared > 0 and self.case.dtype != "float32":
            declared += 2 * UNIT_ROUNDOFF[self.case.dtype]
        return declared


def other_input_kinds(family: Family, case: Case) -> list[str]:
    """The kinds a judged call may draw from instead of the case's own."""
    return [k for k in family.all_input_kinds if k != case.inputs]
