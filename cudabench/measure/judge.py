"""The judge: decides whether a subject is correct and whether its figure can be trusted, in a
process the subject's code never ran in.

The judge holds the fp64 references, the tolerances, every verdict and the choice of which calls to
check. The subject runs in a subject process (cudabench.measure.blind), which holds the inputs and
the op and nothing else. The judge maps the subject's input and output memory (CUDA IPC): it writes
each new set of input values into the subject's inputs itself, and reads a call's outputs where
they lie, cloning what it checks into its own memory first.

One subject:

1. open: the subject process binds the op and makes the inputs from the seed; the judge makes the
   same inputs and checks they agree.
2. the check: one call on them, against the fp64 reference (poisoned output memory, output kinds,
   aliasing, the inputs left as they were).
3. the hot loop: the figure, timed on unchanged inputs.
4. judged calls: FRESH_CALLS more calls, each timed the same way as the hot loop, each on input
   values the judge drew and wrote just before it. The judge alone knows which draws it will check
   (CHECKED_DRAWS of them, at random places, against a new fp64 reference each), where it writes the
   previous call's values again, and where it repeats the first inputs (the determinism check). The
   subject process treats every judged call alike. Calls on new values must not be slower than calls
   on the same values, nor those slower than the hot figure, beyond the noise: a subject whose time
   depends on its inputs staying the same, in full or in part, fails. A host-bound call's judged calls
   are compared by kernel time (CUPTI); a timing verdict that fails must fail again in a second round.
5. the stream-order probe, then the process state.

Every check that fails makes the subject INVALID with its reason (a wrong first check is FAIL)."""

from __future__ import annotations

import random
import secrets
import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Optional, Protocol

import torch

from cudabench import nvtx
from cudabench.errors import CudabenchError
from cudabench.measure import integrity
from cudabench.measure.check import compare, output_specs, reference_results
from cudabench.measure.settings import Settings
from cudabench.measure.subject import Phases, case_inputs, figure, own_work, work_of
from cudabench.measure.transport import TransportError, forget_inline, open_shared
from cudabench.results.exporters.json_document import case_to_dict, measurement_from_dict
from cudabench.results.records.model import Case, Check, IntegrityCheck, Measurement, Result
from cudabench.results.records.stats import summarize
from cudabench.spec.family import UNIT_ROUNDOFF, Family
from cudabench.spec.registry import Registry

NEW_DRAWS = 8          # judged calls on new input values after the hot loop
SAME_DRAWS = 8         # judged calls on the previous call's input values, written again
FRESH_CALLS = NEW_DRAWS + SAME_DRAWS
CHECKED_DRAWS = 2      # new draws checked against a new fp64 reference each
# Judged calls on new values slower than those on the same values by more than this share (plus twice
# the call's own spread, capped: integrity.NOISE_CAP) and an absolute allowance: the time depends on
# the inputs staying the same. Seen on the H100 over 103 honest subjects of the shipped suites:
# new / same within 0.98 .. 1.03.
FRESH_SLACK = 0.10
FRESH_ABSOLUTE = {"sync": 5e-6}  # seconds; 1 µs under the GPU timers
# The hot loop faster than judged calls on the same values by more than this: the hot loop is not what
# the judged calls saw (seen: same / hot within 0.99 .. 1.07). Under sync a judged call's wall time
# also pays the host's first launch after a pause, which the hot loop never does.
HOT_SLACK = 0.10
HOT_ABSOLUTE = {"sync": 30e-6}   # wall time: the host's first launch after a pause (seen: +27 µs)
HOT_ABSOLUTE_GPU = 3e-6          # events, graph, cupti: GPU time (seen: within 7 %)
HOST_BOUND = 0.5                 # GPU busy below this share of the figure: the hot-loop check is not run


class SubjectLost(Exception):
    """The subject process died, hung or broke the protocol; `reason` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SubjectProcess(Protocol):
    """How the judge reaches the subject process (cudabench.engine.judged wires a real process)."""

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The reply to one request; raises SubjectLost."""


class Draw:
    """One set of input values the judge made and wrote into the subject's inputs."""

    def __init__(self, seed: int, inputs: dict, grad_out: Any) -> None:
        self.seed, self.inputs, self.grad_out = seed, inputs, grad_out


class Judge:
    """A judge process's state between subjects: the registry (for the references), the fp64
    references of the current case, the device's ceilings."""

    def __init__(self, registry: Registry, subject: SubjectProcess, device: str = "cuda", ceilings: Any = None,
                 on_status: Callable[[str], None] = lambda s: None) -> None:
        self.registry = registry
        self.subject = subject
        self.device = device
        self.ceilings = ceilings
        self.on_status = on_status
        self._references: dict[tuple[str, int], dict] = {}
        self._rng = random.Random(secrets.randbits(64))   # which calls to check: never sent anywhere
        self._shapes_checked: dict[tuple, IntegrityCheck] = {}  # a variant's random shapes, once per run
        self._ill_conditioned: set[tuple[str, str]] = set()     # (case key, input kind) no kernel can pass

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    # ---- inputs and references -------------------------------------------------------------------

    def draw(self, family: Family, case: Case, seed: int, base: Optional[Draw] = None) -> Draw:
        """Inputs from `seed`; values that are not tensors (a scalar such as eps) are the first draw's,
        which is what the subject holds."""
        inputs, grad_out = case_inputs(family, case, seed, self.device)
        if base is not None:
            inputs = {k: (v if torch.is_tensor(v) else base.inputs[k]) for k, v in inputs.items()}
        return Draw(seed, inputs, grad_out)

    def reference(self, family: Family, case: Case, draw: Draw, keep: bool) -> dict:
        """The fp64 reference on a draw; the first draw's is kept for the case's other subjects."""
        key = (case.key, draw.seed)
        if key in self._references:
            return self._references[key]
        with nvtx.range("reference", "check"):
            ref = reference_results(family, draw.inputs, case.direction, draw.grad_out)
        if keep:
            if any(k[0] != key[0] for k in self._references):
                self._references.clear()
            self._references[key] = ref
        return ref

    # ---- one subject -------------------------------------------------------------------------------

    def run(self, family: Family, case: Case, name: str, role: str, settings: Settings,
            timeout: float = 3600.0) -> Result:
        flops, nbytes = work_of(family.work, case)
        base = Result(case, name, role, flops=flops, bytes=nbytes)
        phases = Phases(self.sync)
        session = Session(self, family, case, base, settings, phases, time.monotonic() + timeout)
        try:
            result = session.run()
            session.finish_quietly()
        except SubjectLost as lost:
            reason = lost.reason
            if reason.startswith("timed out"):
                reason = f"timed out after {timeout:g} s (the kernel may not terminate); the subject process was killed"
            result = replace(session.partial, error=reason)
        except SubjectError as exc:
            result = replace(session.partial, error=exc.message)
        except TransportError as exc:
            result = replace(session.partial, error=f"the subject process sent {exc}")
        finally:
            session.release()
        return replace(result, phases=tuple(phases.seconds.items()))


class Session:
    """One subject being judged: its draws, the subject's shared inputs, the verdicts so far."""

    def __init__(self, judge: Judge, family: Family, case: Case, base: Result, settings: Settings,
                 phases: Phases, deadline: float) -> None:
        self.judge, self.family, self.case, self.base = judge, family, case, base
        self.settings, self.phases, self.deadline = settings, phases, deadline
        self.tolerance = family.tolerance_for(case.dtype)
        self.mapped: dict[str, Any] = {}
        self.mapped_grad: Any = None
        self.first: Optional[Draw] = None
        self.first_outputs: dict = {}
        self.partial = base  # what is known so far, kept when a later step fails
        self.opened = self.finished = False
        self.keep_reference = True  # the first draw's reference kept for the case's other subjects

    # ---- talking to the subject process ------------------------------------------------------------

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise SubjectLost("timed out (the kernel may not terminate)")
        reply = self.judge.subject.ask(request, remaining)
        if reply.get("type") == "error":
            raise SubjectError(str(reply.get("message", reply)), bool(reply.get("skip")))
        return reply

    def write(self, draw: Draw) -> None:
        """The draw's values into the subject's inputs (its memory, written from here)."""
        with torch.no_grad():
            for k, t in self.mapped.items():
                t.copy_(draw.inputs[k])
            if self.mapped_grad is not None:
                self.mapped_grad.copy_(draw.grad_out)
        self.judge.sync()

    def release(self) -> None:
        self.mapped, self.mapped_grad, self.first_outputs, self._last_got = {}, None, {}, None
        forget_inline()

    # ---- the steps ---------------------------------------------------------------------------------

    def run(self) -> Result:
        j, family, case, base, settings = self.judge, self.family, self.case, self.base, self.settings
        with self.phases("inputs"):
            self.first = j.draw(family, case, settings.seed)
        with self.phases("reference"):
            reference = j.reference(family, case, self.first, keep=self.keep_reference)
        specs = output_specs(reference, case.dtype)
        try:
            opened = self.ask({"op": "open", "family": family.name, "case": case_to_dict(case),
                               "subject": base.subject, "role": base.role, "settings": settings.__dict__,
                               "outputs": specs})
        except SubjectError as exc:
            if exc.skip:
                return replace(base, skipped=exc.message)
            return replace(base, error=exc.message)
        self.opened = True
        self.mapped = {k: open_shared(m) for k, m in opened["inputs"].items()}
        self.mapped_grad = open_shared(opened["grad_out"]) if opened.get("grad_out") else None
        if not self._same_inputs(self.first):
            return replace(base, error="the subject process made other inputs than the judge from the same seed "
                                       "(a family whose input maker is not deterministic?)")
        j.on_status(f"{case.key}: checking {base.subject}")
        try:
            with nvtx.range(f"check {base.subject}", "check"), self.phases("check"):
                check, problems = self.judged_call(self.first, reference, keep_outputs=True)
        except SubjectError as exc:
            return replace(base, error=exc.message)
        result = self.partial = replace(base, check=check)
        if problems:  # not timed: what it returns is not an output, or it mutates its inputs
            self.finish()
            return replace(result, check=check if check.errors else None, integrity=tuple(problems))
        if not check.passed and not settings.force:
            return replace(result, skipped=f"failed the check: error {check.worst:.3g} > tolerance {self.tolerance:g}")
        if not settings.time:
            self.finish()
            return result
        return self.timed(result, reference)

    def timed(self, result: Result, reference: dict) -> Result:
        j, settings, case = self.judge, self.settings, self.case
        with self.phases("check"):
            peak = self.ask({"op": "peak"})["peak_memory"]
        result = replace(result, peak_memory=int(peak))
        j.on_status(f"{case.key}: timing {result.subject}")
        self.write(self.first)
        start = time.perf_counter()
        hot = self.ask({"op": "hot"})
        m = measurement_from_dict(hot["measurement"])
        self.phases.add("warm-up", m.warmup_seconds)
        self.phases.add("sampling", hot["sampling_seconds"])
        cupti = hot.get("cupti") or {}
        self.phases.add("integrity/cupti", max(0.0, time.perf_counter() - start - m.warmup_seconds
                                               - hot["sampling_seconds"]))
        m = with_kernel_time(m, cupti)
        result = self.partial = self._with_ceiling(replace(result, measurement=m, stats=summarize(m.samples)))
        if not settings.integrity:
            self.finish()
            return result
        j.on_status(f"{case.key}: integrity of {result.subject}")
        self.judged_timing = self._judged_timing(result, cupti)
        with self.phases("integrity"):
            checks = self.integrity(result, reference, cupti)
        return replace(result, integrity=checks)

    last_sample: Optional[float] = None
    _last_got: Optional[dict] = None
    judged_timing = ""            # the judged calls' timer: the hot loop's, or cupti for a host-bound call
    hot_kernel: list[float] = []  # the CUPTI pass's kernel time per call, on the hot loop's inputs

    def _judged_timing(self, result: Result, cupti: dict) -> str:
        """A call whose GPU is busy less than HOST_BOUND of its sync or events figure is mostly the
        host's launching, which a pause before a judged call slows by more than a cache saves (seen:
        an honest 109 µs conv1d call at 227 µs after a pause; a memo's new and same calls 283 and
        269 µs under sync, 45.9 and 10.9 µs of kernel time). Its judged calls are timed by their
        kernel time, and so compared with the CUPTI pass's."""
        busy, kernel = cupti.get("busy") or [], cupti.get("kernel_samples") or []
        self.hot_kernel = list(kernel)
        timing = self.settings.timing
        if timing in ("sync", "events") and busy and len(kernel) >= 3 \
                and statistics.median(busy) < HOST_BOUND * result.stats.median:
            return "cupti"
        return timing  # under cupti too, a round is one CUPTI session: see BlindRunner.round

    def judged_call(self, draw: Draw, reference: Optional[dict], keep_outputs: bool = False,
                    eager: bool = False) -> tuple[Check, list[IntegrityCheck]]:
        """Poison the outputs' memory, write the draw, make one call, and judge it: output kinds and
        aliasing always; values and the inputs' integrity when `reference` is given (else the outputs
        are left unread)."""
        self._last_got = None
        self.ask({"op": "poison"})
        self.write(draw)
        reply = self.ask({"op": "call", "eager": eager} if eager else {"op": "call"})
        self.last_sample = reply.get("sample")
        opened, problems = self._open_outputs(reply["outputs"])
        if reference is None or problems:
            return Check((), self.tolerance), problems
        got = {k: t.clone() for k, t in opened.items()}
        self.judge.sync()
        self._last_got = got
        if keep_outputs:
            self.first_outputs = got
        mutated = self._mutated(draw)
        if mutated:
            problems.append(IntegrityCheck("inputs", "fail", f"it mutates its inputs: {mutated}"))
        return compare(got, reference, self.tolerance), problems

    # ---- integrity -----------------------------------------------------------------------------------

    def integrity(self, result: Result, reference: dict, cupti: dict) -> tuple[IntegrityCheck, ...]:
        j, family, case, settings = self.judge, self.family, self.case, self.settings
        busy, counts = cupti.get("busy", []), cupti.get("counts", [])
        with self.phases("integrity/judged calls"):
            checks = list(self.fresh_calls(result, busy))
        with self.phases("integrity/stream-order"):
            checks.append(self.stream_order(reference, result.check))
        checks.append(integrity.timed_window(result.stats.median, busy, settings.timing))
        checks.append(integrity.no_work(counts, result.flops, result.bytes))
        l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)) \
            if j.device == "cuda" else 0
        flops, nbytes = own_work(family, case, result)
        checks.append(integrity.impossible(figure(result), flops, nbytes, j.ceilings, l2, settings.cold, case.dtype))
        with self.phases("integrity/process state"):
            left = self.finish()
        checks.append(integrity.process_state(left["patched"], left["changed"], settings.cold))
        checks.append(integrity.threads_left(left["threads"], trusted=self.base.role == "baseline"))
        with self.phases("integrity/shapes"):
            checks.append(self.shapes())
        return tuple(checks)

    def shapes(self) -> IntegrityCheck:
        """The variant checked at `settings.fuzz` random shapes within its constraints, chosen here
        (ragged sizes, small): a kernel written for the shapes it is timed at fails elsewhere. Once
        per variant, precision and direction in a judge's life (a run): the shapes do not depend on
        the case, and a sweep would otherwise pay them at every point."""
        if self.settings.fuzz <= 0:
            return IntegrityCheck("shapes", "not run", "not checked: --fuzz 0")
        if self.base.role != "variant":
            return IntegrityCheck("shapes", "not run", "baselines are PyTorch's own")
        key = (self.family.name, self.base.subject, self.case.dtype, self.case.direction, self.case.inputs,
               self.settings.fuzz)
        earlier = self.judge._shapes_checked.get(key)
        if earlier is not None:
            return replace(earlier, detail=f"{earlier.detail} (checked at its first case in this run)")
        verdict = self._random_shapes()
        if verdict.verdict != "not run":
            self.judge._shapes_checked[key] = verdict
        return verdict

    def _random_shapes(self) -> IntegrityCheck:
        from cudabench.spec.fuzz import random_shapes

        try:
            variant = self.family.variant(self.base.subject)
        except KeyError:
            return IntegrityCheck("shapes", "not run", "recorded under another name")
        shapes = random_shapes(self.family, variant, self.settings.fuzz, self.judge._rng)
        if not shapes:
            return IntegrityCheck("shapes", "not run", "no small shape meets its constraints")
        wrong = []
        for shape in shapes:
            case = replace(self.case, shape=tuple(shape.items()))
            settings = replace(self.settings, time=False, seed=secrets.randbits(31))
            other = Session(self.judge, self.family, case, replace(self.base, case=case), settings,
                            Phases(self.judge.sync), self.deadline)
            other.keep_reference = False
            try:
                r = other.run()
                other.finish_quietly()
            except SubjectError as exc:
                r = replace(other.partial, error=exc.message)
            finally:
                other.release()
            if r.status != "ok":
                why = r.error or r.skipped or r.invalid_because or (
                    f"error {r.check.worst:.2g} > tolerance {r.check.tolerance:g}" if r.check else r.status)
                wrong.append(f"{case.shape_text}: {why}")
        texts = ", ".join(Case(self.case.family, tuple(s.items())).shape_text for s in shapes)
        if wrong:
            return IntegrityCheck("shapes", "fail", f"wrong at a random shape within its constraints: "
                                                    f"{'; '.join(wrong)} (written for the timed shape only?)")
        return IntegrityCheck("shapes", "pass", f"also right at {texts}")

    def fresh_calls(self, result: Result, busy: list[float]) -> list[IntegrityCheck]:
        """Judged calls after the hot loop, timed like it: NEW_DRAWS on new input values and SAME_DRAWS
        on the values of the call before written again (a cache of one entry hits on them, as in the
        hot loop, and misses on new ones), in an order only the judge knows. It checks CHECKED_DRAWS of
        the new ones against a new fp64 reference, one more new one drawn from another input kind
        (picked at random, named in the verdict), and one of the same ones against the first check's
        outputs (determinism). New and same are made the same way, so their medians differ only if
        the subject's time depends on its inputs staying the same.

        A timing verdict that fails is put to a second round of new and same calls (no outputs
        read): it stands only if that round fails one too. A pause before judged calls can slow an
        honest small call by more than the slack once in a while; a cache is slow on new values
        every time, and one that stops caching in the second round fails the hot-loop check."""
        kind, kind_draw, kind_reference, why_not = self._other_kind()
        first = self._round(self._plan(with_kind=kind is not None), kind_draw, kind_reference)
        timing = self._timing_verdicts(first.samples, result, busy)
        problems = first.problems
        if any(c.failed for c in timing):
            second = self._round(self._plan(checks=False), None, None)
            timing = _confirmed(timing, self._timing_verdicts(second.samples, result, busy))
            problems = problems + second.problems
        out = [self._fresh_verdict(first.errors, result), *timing, self._determinism(first.repeat),
               _kind_verdict(kind, first.kind_check, why_not)]
        return out + _dedupe(problems)

    def _plan(self, with_kind: bool = False, checks: bool = True) -> list[str]:
        """A round's steps in an order only the judge knows: "new", "same" and, with `checks`,
        CHECKED_DRAWS "checked" new ones, one "kind" (when another kind can be drawn) and one
        "repeat" (a same one on the first values)."""
        rng = self.judge._rng
        plan = ["new"] * NEW_DRAWS + ["same"] * SAME_DRAWS
        rng.shuffle(plan)
        if not checks:
            return plan
        places = rng.sample([i for i, k in enumerate(plan) if k == "new"], CHECKED_DRAWS + 1)
        for p in places[:-1]:
            plan[p] = "checked"
        if with_kind:
            plan[places[-1]] = "kind"
        plan[rng.choice([i for i, k in enumerate(plan) if k == "same"])] = "repeat"
        return plan

    def _round(self, plan: list[str], kind_draw: Optional[Draw], kind_reference: Optional[dict]) -> "Round":
        j, family, case = self.judge, self.family, self.case
        found = Round()
        # an eager repeat under graph timing: see BlindRunner.call
        eager_repeat = self.settings.timing == "graph"
        previous = self.first  # the values of the subject's last call (the hot loop's)
        by_kernel_time = self.judged_timing == "cupti"
        if by_kernel_time:
            self.ask({"op": "round"})
        timed: list[tuple[str, Optional[float]]] = []
        for step in plan:
            fresh = step in ("new", "checked", "kind")
            draw, reference = previous, None  # "same": the last call's values, written again
            if step == "kind":
                draw, reference = kind_draw, kind_reference
            elif fresh:
                draw = j.draw(family, case, secrets.randbits(62), self.first)
            elif step == "repeat":
                draw = self.first
            if step == "checked":
                with self.phases("integrity/references"):
                    reference = j.reference(family, case, draw, keep=False)
            elif step == "repeat":
                reference = j.reference(family, case, self.first, keep=self.keep_reference)
            self.last_sample = None
            check, problems = self.judged_call(draw, reference, eager=eager_repeat and step == "repeat")
            previous = draw
            found.problems += problems
            timed.append(("new" if fresh else "same", self.last_sample))
            if reference is not None and not problems:
                if step == "kind":
                    found.kind_check = check
                else:
                    found.errors.append(check)
            if step == "repeat" and not problems:
                found.repeat = self._last_got
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

    def _timing_verdicts(self, samples: dict[str, list[float]], result: Result,
                         busy: list[float]) -> list[IntegrityCheck]:
        return [self._fresh_figure(samples, result), self._hot_loop(samples["same"], result, busy)]

    def _other_kind(self) -> tuple[Optional[str], Optional[Draw], Optional[dict], str]:
        """A kind other than the case's own, picked at random, with a draw of it and its fp64
        reference, for one judged call: the first whose draw an honest kernel can get right (kinds
        found ill-conditioned for the case are not tried again). None and why when there is none."""
        from cudabench.measure.kinds import honest_can_pass

        if self.base.role != "variant":
            return None, None, None, "baselines are PyTorch's own"
        j, family, case = self.judge, self.family, self.case
        kinds = [k for k in other_input_kinds(family, case) if (case.key, k) not in j._ill_conditioned]
        j._rng.shuffle(kinds)
        for kind in kinds:
            kind_case = replace(case, inputs=kind)
            with self.phases("integrity/references"):
                draw = j.draw(family, kind_case, secrets.randbits(62), self.first)
                reference = j.reference(family, kind_case, draw, keep=False)
                if honest_can_pass(family, kind_case, draw.inputs, draw.grad_out, reference):
                    return kind, draw, reference, ""
            j._ill_conditioned.add((case.key, kind))
        return None, None, None, "no other input kind is one a float32 kernel can get right at this case"

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

    def _hot_loop(self, same: list[float], result: Result, busy: list[float]) -> IntegrityCheck:
        if len(same) < 3:
            return IntegrityCheck("hot-loop", "not run", "too few timed judged calls")
        gpu = statistics.median(busy) if busy else None
        if self.judged_timing == self.settings.timing and gpu is not None and gpu < HOST_BOUND * result.stats.median:
            # graph timing's judged calls are replays like its hot loop; a replay whose GPU is mostly
            # idle is not what this compares
            return IntegrityCheck("hot-loop", "not run", f"the GPU is busy {integrity.fmt(gpu)} of its "
                                                         f"{integrity.fmt(result.stats.median)} per call")
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

    def stream_order(self, reference: dict, check: Check) -> IntegrityCheck:
        # the inputs hold a new draw: only a call ordered after the subject process writes the first
        # values back on its stream sees them
        self.write(self.judge.draw(self.family, self.case, secrets.randbits(62), self.first))
        try:
            reply = self.ask({"op": "order"})
        except SubjectError as exc:
            return integrity.failed_call("stream-order", exc)
        opened, problems = self._open_outputs(reply["outputs"])
        if problems:
            return IntegrityCheck("stream-order", "not run", "its outputs could not be read")
        got = {k: t.clone() for k, t in opened.items()}
        self.judge.sync()
        return integrity.from_check("stream-order", compare(got, reference, self.tolerance), check.worst,
                                    integrity.ORDER_WHAT)

    def finish(self) -> dict:
        self.finished = True
        return self.ask({"op": "finish"})

    def finish_quietly(self) -> None:
        """A subject that stopped early (failed its check, could not run) still gets its process state
        restored before the next one."""
        if not self.finished and self.opened:
            self.finish()

    # ---- what a call's outputs and inputs may not be -----------------------------------------------

    def _open_outputs(self, outputs: dict) -> tuple[dict, list[IntegrityCheck]]:
        """The outputs mapped here, and what is wrong with them: each must be a plain dense tensor of
        the case's dtype on its device, sharing no memory with an input (a view or alias of an input,
        a lazy subclass, the wrong dtype or strides)."""
        opened, found = {}, []
        for name, meta in outputs.items():
            why = integrity.output_kind(name, meta, self.case.dtype, self.judge.device)
            if why:
                found.append(IntegrityCheck("output", "fail", why))
                continue
            t = opened[name] = open_shared(meta)
            for k, inp in self.mapped.items():
                if _overlaps(t, inp):
                    found.append(IntegrityCheck("output", "fail", f"{name} shares memory with the input {k} "
                                                                  "(a view or alias of an input)"))
        return opened, found

    def _same_inputs(self, draw: Draw) -> bool:
        return not self._mutated(draw)

    def _mutated(self, draw: Draw) -> str:
        """Which inputs differ from the values the judge wrote, and how much ('' when none)."""
        changed = []
        for k, t in self.mapped.items():
            want = draw.inputs[k]
            same = torch.eq(t, want) | (torch.isnan(t) & torch.isnan(want))
            bad = int((~same).sum())
            if bad:
                changed.append(f"{k} changed in {bad} of {t.numel()} elements")
        if self.mapped_grad is not None:
            same = torch.eq(self.mapped_grad, draw.grad_out)
            bad = int((~same).sum())
            if bad:
                changed.append(f"the upstream gradient changed in {bad} of {self.mapped_grad.numel()} elements")
        return "; ".join(changed)

    def _with_ceiling(self, result: Result) -> Result:
        j = self.judge
        if j.ceilings is None or not self.family.bound or result.stats is None:
            return result
        extra = dict(result.measurement.extra)
        flops, nbytes = own_work(self.family, result.case, result)
        share = j.ceilings.of(self.family.bound, flops, nbytes, figure(result), result.case.dtype)
        if share is None:
            return result
        extra["ceiling_fraction"] = share
        return replace(result, measurement=replace(result.measurement, extra=tuple(extra.items())))


class SubjectError(CudabenchError):
    """The subject process answered a request with an error (a binding's TORCH_CHECK, a CUDA error)."""

    def __init__(self, message: str, skip: bool = False) -> None:
        super().__init__(message)
        self.skip = skip


def other_input_kinds(family: Family, case: Case) -> list[str]:
    """The kinds a judged call may draw from instead of the case's own."""
    return [k for k in family.all_input_kinds if k != case.inputs]


class Round:
    """What one round of judged calls found."""

    def __init__(self) -> None:
        self.samples: dict[str, list[float]] = {"new": [], "same": []}
        self.errors: list[Check] = []
        self.problems: list[IntegrityCheck] = []
        self.repeat: Optional[dict] = None
        self.kind_check: Optional[Check] = None


def _confirmed(first: list[IntegrityCheck], second: list[IntegrityCheck]) -> list[IntegrityCheck]:
    """The first round's timing verdicts once a second round was run: a failure stands when the
    second round fails either check (a cache that stops caching when it sees more judged calls than
    usual fails hot-loop instead), and is cleared otherwise."""
    again = [c for c in second if c.failed]
    out = []
    for c, later in zip(first, second):
        if not c.failed:
            out.append(c)
        elif again:
            out.append(replace(c, detail=f"{c.detail}; again in a second round of judged calls: "
                                         f"{'; '.join(a.detail for a in again)}"))
        else:
            out.append(replace(later, detail=f"{later.detail} (a second round of judged calls; the first "
                                             f"flagged it: {c.detail})"))
    return out


def _kind_verdict(kind: Optional[str], check: Optional[Check], why_not: str) -> IntegrityCheck:
    """The judged call on another input kind: right on it too, or tuned to one distribution."""
    if kind is None:
        return IntegrityCheck("distribution", "not run", why_not)
    if check is None:
        return IntegrityCheck("distribution", "not run", f"the call on {kind} inputs could not be read")
    if check.passed:
        return IntegrityCheck("distribution", "pass", f"right on {kind} inputs too (drawn at random), "
                                                      f"error {check.worst:.1e}")
    return IntegrityCheck("distribution", "fail", f"wrong on {kind} inputs (drawn at random): error "
                                                  f"{check.worst:.3g} > tolerance {check.tolerance:g} "
                                                  "(tuned to one input distribution?)")


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    a1 = a0 + (a.untyped_storage().nbytes() - a.storage_offset() * a.element_size())
    b1 = b0 + (b.untyped_storage().nbytes() - b.storage_offset() * b.element_size())
    return a0 < b1 and b0 < a1


def _dedupe(checks: list[IntegrityCheck]) -> list[IntegrityCheck]:
    seen, out = set(), []
    for c in checks:
        if (c.name, c.detail) not in seen:
            seen.add((c.name, c.detail))
            out.append(c)
    return out


def with_kernel_time(m: Measurement, cupti: dict[str, Any]) -> Measurement:
    """The CUPTI pass's figures beside the timer's: kernel time for launch-dominated calls, kernels
    per call."""
    extra = list(m.extra)
    median = summarize(m.samples).median
    kernel = cupti.get("kernel_median", 0.0)
    if cupti.get("short") and kernel > 0:
        extra += [("kernel_time_cupti", kernel), ("launch_and_sync_overhead", median - kernel)]
    if cupti.get("counts"):
        extra.append(("kernels_per_call", float(statistics.median(cupti["counts"]))))
    return replace(m, extra=tuple(extra))
