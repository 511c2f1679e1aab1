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
5. calls alone under graph timing (serial_calls.py), the stream-order probe, the process state; from
   step 3 on, the processes the subject starts are watched (processes.py). Every check that fails
   makes the subject INVALID with its reason (a wrong first check is FAIL)."""

from __future__ import annotations

import math
import random
import secrets
import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Optional, Protocol

import torch

from cudabench import nvtx
from cudabench.measure import kinds
from cudabench.measure.check import output_specs, reference_results
from cudabench.measure.integrity_pass import IntegrityPass
from cudabench.measure.cupti_pass import with_kernel_time
from cudabench.measure.judged_calls import HOST_BOUND, SYNC_HOST_SHARE, JudgedCalls, SubjectError, SubjectLost
from cudabench.measure.lanes import Draw, Lanes, write_lane
from cudabench.measure.memory import release_cached
from cudabench.measure.settings import Settings, shapes_key
from cudabench.measure.subject import Phases, case_inputs, work_of
from cudabench.measure.serial_calls import SerialCalls
from cudabench.measure.taken import TakenCalls
from cudabench.measure.transport import TransportError, forget_inline, open_shared
from cudabench.results.exporters.json_document import case_to_dict, measurement_from_dict
from cudabench.results.records.model import Case, IntegrityCheck, Result
from cudabench.results.records.stats import summarize
from cudabench.spec.family import Family
from cudabench.spec.registry import Registry


class SubjectProcess(Protocol):
    """How the judge reaches the subject process (cudabench.engine.judged wires a real process)."""

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """The reply to one request; raises SubjectLost."""

    def ask_while(self, request: dict[str, Any], timeout: float, work: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
        """`ask`, and what `work` returned, done here while the subject process answers."""


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
        self.processes_after: Optional[set[int]] = None         # the process tree when a subject's watch ended

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
            timeout: float = 3600.0, shapes: tuple[str, ...] = ()) -> Result:
        """Judge one subject. `shapes`: (verdict, detail) of its random-shapes check by another GPU's
        judge in this run, taken unless this judge has its own."""
        if len(shapes) == 2:
            self._shapes_checked.setdefault(shapes_key(name, case, settings.fuzz),
                                            IntegrityCheck("shapes", shapes[0], shapes[1]))
        flops, nbytes = work_of(family.work, case, family)
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
            session.stop_watch()  # a subject that ended early: what it started ends too
            session.release()
            if self.device == "cuda":
                release_cached(collect=False)  # the reference's fp64 temporaries, the draws' copies
        return replace(result, phases=tuple(phases.seconds.items()))


class Session(TakenCalls, IntegrityPass, JudgedCalls, SerialCalls):
    """One subject being judged: its draws, the subject's shared inputs, the verdicts so far."""

    def __init__(self, judge: Judge, family: Family, case: Case, base: Result, settings: Settings,
                 phases: Phases, deadline: float) -> None:
        self.judge, self.family, self.case, self.base = judge, family, case, base
        self.settings, self.phases, self.deadline = settings, phases, deadline
        self.tolerance = family.tolerance_for(case.dtype)
        self.mapped: dict[str, Any] = {}
        self.mapped_grad: Any = None
        self.lanes: Optional[Lanes] = None  # a graph's calls on inputs of their own (graph timing)
        self.first: Optional[Draw] = None
        self.first_outputs: dict = {}
        self.partial = base  # what is known so far, kept when a later step fails
        self.opened = self.finished = False
        self.keep_reference = True  # the first draw's reference kept for the case's other subjects

    # ---- talking to the subject process ------------------------------------------------------------

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        return self._replied(self.judge.subject.ask(request, self._remaining()))

    def ask_while(self, request: dict[str, Any], work: Callable[[], Any]) -> tuple[dict[str, Any], Any]:
        """`ask`, and `work` done here while the subject process answers it."""
        reply, value = self.judge.subject.ask_while(request, self._remaining(), work)
        return self._replied(reply), value

    def _remaining(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise SubjectLost("timed out (the kernel may not terminate)")
        return remaining

    @staticmethod
    def _replied(reply: dict[str, Any]) -> dict[str, Any]:
        if reply.get("type") == "error":
            raise SubjectError(str(reply.get("message", reply)), bool(reply.get("skip")), bool(reply.get("stale")))
        return reply

    def write(self, draw: Draw, inputs: bool = True, grad: bool = True) -> None:
        """The draw's values into the subject's inputs and upstream gradient (its memory, written from here)."""
        write_lane(self.mapped, self.mapped_grad, draw, inputs, grad)
        if self.lanes is not None:
            self.lanes.wrote(0, draw)
        self.judge.sync()

    def release(self) -> None:
        self.mapped, self.mapped_grad, self.first_outputs, self.lanes = {}, None, {}, None
        self.first = None  # its draw's tensors, before the judge hands cached memory back
        self.prepared = None  # a first round's draws and references that a subject stopped before
        forget_inline()

    def draw_tolerance(self, draw: Draw, reference: dict) -> float:
        """What a call on `draw` (of the case's own kind) is held to: kinds.draw_tolerance."""
        return kinds.draw_tolerance(self.family, self.case, draw.inputs, draw.grad_out, reference)

    # ---- the steps ---------------------------------------------------------------------------------

    def run(self) -> Result:
        j, family, case, base, settings = self.judge, self.family, self.case, self.base, self.settings
        with self.phases("inputs"):
            self.first = j.draw(family, case, settings.seed)
        with self.phases("reference"):
            reference = j.reference(family, case, self.first, keep=self.keep_reference)
            self.tolerance = self.draw_tolerance(self.first, reference)
        if not math.isfinite(self.tolerance):  # the family's rounded math overflows, or errs past the cap
            return replace(base, skipped=f"no honest kernel computes this seed's {case.inputs} inputs in "
                                         f"{case.dtype} (rounding alone errs past four tolerances): try another --seed")
        specs = output_specs(reference, case.dtype)
        self.watch_before()
        request = {"op": "open", "family": family.name, "case": case_to_dict(case), "subject": base.subject,
                   "role": base.role, "settings": settings.__dict__, "outputs": specs}
        # the judged calls' draws and references are made while the subject process opens (5-7 ms a subject)
        ahead = self.prepare_calls if settings.time and settings.integrity else (lambda: None)
        try:
            opened = self._open(request, ahead)
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
            return replace(result, skipped=f"failed the check: error {check.worst:.3g} > tolerance {self.tolerance:.3g}")
        if not settings.time:
            self.finish()
            return result
        return self.timed(result, reference)

    def _open(self, request: dict[str, Any], ahead: Callable[[], Any]) -> dict[str, Any]:
        """The subject opened; in a fresh subject process where the judge reads threads in the one it has that
        earlier code left running (a skipped subject's, an extension's loading), and once more in a fresh one
        where that process itself answers that it cannot serve the subject (cudabench.measure.upkeep)."""
        link = self.judge.subject
        ledger = getattr(link, "threads", None)
        if ledger is not None and ledger.unknown():
            link.drop()
        try:
            return self.ask_while(request, ahead)[0]
        except SubjectError as exc:
            if not exc.stale:
                raise
            self.judge.on_status(f"{self.case.key}: {exc.message}")
            return self.ask_while(request, lambda: None)[0]

    def timed(self, result: Result, reference: dict) -> Result:
        j, settings, case = self.judge, self.settings, self.case
        with self.phases("check"):
            peak = self.ask({"op": "peak"})["peak_memory"]
        result = replace(result, peak_memory=int(peak))
        j.on_status(f"{case.key}: timing {result.subject}")
        self.write(self.first)
        if self.watch is not None:
            self.watch.watch()
        start = time.perf_counter()
        hot = self.ask({"op": "hot"})
        m = measurement_from_dict(hot["measurement"])
        self.phases.add("warm-up", m.warmup_seconds)
        self.phases.add("sampling", hot["sampling_seconds"])
        cupti = hot.get("cupti") or {}
        self.phases.add("integrity/cupti", max(0.0, time.perf_counter() - start - m.warmup_seconds
                                               - hot["sampling_seconds"]))
        m = with_kernel_time(m, cupti)
        if settings.timing == "graph" and case.direction != "bwd":
            self.lanes = self.graph_lanes(hot.get("lanes") or [], m.calls_per_sample)
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
    judged_timing = ""            # the judged calls' timer: the hot loop's, or cupti for a host-bound call
    hot_kernel: list[float] = []  # the CUPTI pass's kernel time per call, on the hot loop's inputs

    def _judged_timing(self, result: Result, cupti: dict) -> str:
        """A call whose GPU is busy less than HOST_BOUND of its sync or events figure is mostly the
        host's launching, which a pause before a judged call slows by more than a cache saves (seen:
        an honest 109 µs conv1d call at 227 µs after a pause; a memo's new and same calls 283 and
        269 µs under sync, 45.9 and 10.9 µs of kernel time). Under sync, so is any call whose host
        part exceeds the hot-loop slack (SYNC_HOST_SHARE). Its judged calls are timed by their
        kernel time, and so compared with the CUPTI pass's."""
        busy, kernel = cupti.get("busy") or [], cupti.get("kernel_samples") or []
        self.hot_kernel = list(kernel)
        timing = self.settings.timing
        share = {"sync": SYNC_HOST_SHARE, "events": HOST_BOUND}.get(timing)
        if share is not None and busy and len(kernel) >= 3 \
                and statistics.median(busy) < share * result.stats.median:
            return "cupti"
        return timing  # under cupti too, a round is one CUPTI session: see BlindRunner.round
