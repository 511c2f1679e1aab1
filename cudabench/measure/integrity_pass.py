"""The integrity pass after the judged calls (cudabench.measure.judge, step 5 and the verdicts that
need no more calls): the stream-order probe, the figures held to the timed window, the work done and
the device's ceilings, the process state and threads left, and the check at random shapes; and what
any call's outputs and inputs may not be. A mixin of the judge's Session."""

from __future__ import annotations

import math
import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Optional

import torch

from cudabench.measure import integrity
from cudabench.measure.check import compare
from cudabench.measure.clocks import l2_bytes
from cudabench.measure.judged_calls import SubjectError, SubjectLost
from cudabench.measure.lanes import Lanes, lane_outputs, lane_seeds, overlap, shares_memory
from cudabench.measure.processes import ProcessWatch
from cudabench.measure.settings import shapes_key
from cudabench.measure.stream_order import again_hold
from cudabench.measure.subject import Phases, figure, own_work
from cudabench.measure.transport import open_shared
from cudabench.results.records.model import Case, Check, IntegrityCheck, Result

if TYPE_CHECKING:
    from cudabench.measure.lanes import Draw


class IntegrityPass:
    """The integrity checks of one subject (mixed into cudabench.measure.judge.Session)."""

    def integrity(self, result: Result, reference: dict, cupti: dict) -> tuple[IntegrityCheck, ...]:
        j, family, case, settings = self.judge, self.family, self.case, self.settings
        busy, counts = cupti.get("busy", []), cupti.get("counts", [])
        with self.phases("integrity/judged calls"):
            checks = list(self.fresh_calls(result))
        if settings.timing == "graph":
            with self.phases("integrity/serial calls"):
                checks.append(self.serial_calls(result))
        with self.phases("integrity/stream-order"):
            checks.append(self.stream_order(reference, result.check))
        checks.append(integrity.timed_window(result.stats.median, busy, settings.timing))
        checks.append(integrity.no_work(counts, result.flops, result.bytes))
        l2 = l2_bytes() if j.device == "cuda" else 0
        flops, nbytes = own_work(family, case, result)
        checks.append(integrity.impossible(figure(result), flops, nbytes, j.ceilings, l2, settings.cold, case.dtype))
        with self.phases("integrity/process state"):
            left = self.finish()
        checks.append(integrity.process_state(left["patched"], left["changed"], settings.cold, left.get("lasting", ())))
        checks.append(integrity.threads_left(left["threads"], trusted=self.base.role == "baseline"))
        if self.watch is not None:
            self.watch.pause()
        with self.phases("integrity/shapes"):
            checks.append(self.shapes())
        checks.append(self.processes())
        return tuple(checks)

    # ---- the process state, and the processes the subject starts (cudabench.measure.processes) -----

    def finish(self) -> dict:
        """The subject dropped; what it left, as its process reports it and as the judge reads its threads from
        outside (a process whose reading of its own threads was forged is replaced all the same)."""
        self.finished = True
        link = self.judge.subject
        ledger = getattr(link, "threads", None)  # taken first: a reply that is not healthy drops it with the process
        self.left = self.ask({"op": "finish"})
        if ledger is not None:
            found = ledger.unknown() if link.threads is ledger else link.dropped_threads
            self.left = ledger.after_finish(self.left, self.base.role == "baseline", found)
            if not self.left.get("healthy", True) and link.threads is ledger:
                link.drop()
        return self.left

    def finish_quietly(self) -> None:
        """A subject that stopped early (failed its check, could not run) still gets its process state
        restored before the next one."""
        if not self.finished and self.opened:
            self.finish()

    watch: Optional[ProcessWatch] = None
    left: Optional[dict] = None      # what the subject process's last `finish` reported
    ended_before: dict = {}          # processes an earlier subject's code started after its watch ended

    def watch_before(self) -> None:
        """Before the subject opens: the processes that are not its own, and those an earlier subject's
        code started since its watch ended, which are ended (with the subject process). Not where the
        judge cannot see the subject process's pid, nor for a subject that is not timed."""
        ids = getattr(self.judge.subject, "process_ids", None)
        if ids is not None and self.settings.time and self.settings.integrity:
            self.watch = ProcessWatch(ids)
            self.ended_before = self.watch.before(self.judge.processes_after)
            if self.ended_before:
                getattr(self.judge.subject, "drop", lambda: None)()

    def processes(self) -> IntegrityCheck:
        """The verdict on the processes the subject started (cudabench.measure.processes)."""
        watch = self.watch
        seen = self.stop_watch()  # its last look may fail too: the error is read after it
        error = watch.error if watch is not None else ""
        check = integrity.processes_left(seen, trusted=self.base.role == "baseline", error=error)
        if self.ended_before and check.verdict == "pass":
            left = "; ".join(self.ended_before.values())
            check = replace(check, detail=f"{check.detail} (ended before it opened, left by an earlier subject's "
                                          f"code: {left})".strip())
        return check

    def stop_watch(self) -> dict[int, str]:
        """What the subject started; a variant's processes are ended, and its subject process is replaced
        (a process the judge could not see could still hold its memory)."""
        watch, self.watch = self.watch, None
        if watch is None:
            return {}
        trusted = self.base.role == "baseline"
        seen = watch.stop(end_them=not trusted)
        if seen and not trusted:
            getattr(self.judge.subject, "drop", lambda: None)()
        self.judge.processes_after = watch.tree() if not watch.error else None
        return seen

    def shapes(self) -> IntegrityCheck:
        """The variant checked at `settings.fuzz` random shapes within its constraints, chosen here
        (ragged sizes, small): a kernel written for the shapes it is timed at fails elsewhere. Once
        per variant, precision and direction in a run (settings.shapes_key): the shapes do not depend
        on the case, and a sweep would otherwise pay them at every point. Another GPU's judge may have
        checked them already in this run: the caller then sends its verdict with the request."""
        if self.settings.fuzz <= 0:
            return IntegrityCheck("shapes", "not run", "not checked: --fuzz 0")
        if self.base.role != "variant":
            return IntegrityCheck("shapes", "not run", "baselines are PyTorch's own")
        key = shapes_key(self.base.subject, self.case, self.settings.fuzz)
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
            other = type(self)(self.judge, self.family, case, replace(self.base, case=case), settings,
                            Phases(self.judge.sync), self.deadline)
            other.keep_reference = False
            try:
                r = other.run()
                other.finish_quietly()
            except SubjectError as exc:
                r = replace(other.partial, error=exc.message)
            finally:
                other.release()
            threads = (other.left or {}).get("threads") or []
            if threads and r.status == "ok":  # not timed, but left to act later (on the next subject's calls)
                r = replace(r, error=f"left host threads running: {', '.join(threads)}")
            if r.status != "ok":
                why = r.error or r.skipped or r.invalid_because or (
                    f"error {r.check.worst:.2g} > tolerance {r.check.tolerance:g}" if r.check else r.status)
                wrong.append(f"{case.shape_text}: {why}")
        texts = ", ".join(Case(self.case.family, tuple(s.items())).shape_text for s in shapes)
        if wrong:
            return IntegrityCheck("shapes", "fail", f"wrong at a random shape within its constraints: "
                                                    f"{'; '.join(wrong)} (written for the timed shape only?)")
        return IntegrityCheck("shapes", "pass", f"also right at {texts}")

    def stream_order(self, reference: dict, check: Check) -> IntegrityCheck:
        """The stream-order probe (cudabench.measure.stream_order): the inputs hold a new draw, so only a
        call ordered after the subject process writes the first values back on its stream sees them. A
        probe whose hold ran out before its call was queued is made again with a longer hold (once)."""
        request: dict = {"op": "order"}
        for _ in range(2):
            self.write(self.judge.draw(self.family, self.case, secrets.randbits(62), self.first))
            try:
                reply = self.ask(request)
            except SubjectError as exc:
                return integrity.failed_call("stream-order", exc)
            opened, problems = self._open_outputs(reply["outputs"])
            if problems:
                return IntegrityCheck("stream-order", "not run", "its outputs could not be read")
            got = {k: t.clone() for k, t in opened.items()}
            self.judge.sync()
            verdict = integrity.from_check("stream-order", compare(got, reference, self.tolerance), check.worst,
                                           integrity.ORDER_WHAT)
            hold = again_hold(float(reply.get("issued", 0.0)), float(reply.get("hold", 1.0)))
            if verdict.failed or hold is None:
                return verdict
            request = {"op": "order", "hold": hold}
        return replace(verdict, detail=f"{verdict.detail} (its call was still being queued when the stream's hold "
                                       "ended, twice: it waits for the stream itself?)".strip())

    # ---- what a call's outputs and inputs may not be -----------------------------------------------

    def _open_outputs(self, outputs: dict, lane: int = 0) -> tuple[dict, list[IntegrityCheck]]:
        """The outputs mapped here, and what is wrong with them: each must be a plain dense tensor of
        the case's dtype on its device, sharing no memory with an input (a view or alias of an input,
        a lazy subclass, the wrong dtype or strides). `lane`: which of a graph's calls made them."""
        opened, found = {}, []
        inputs = self._lane(lane)[0]
        for name, meta in outputs.items():
            why = integrity.output_kind(name, meta, self.case.dtype, self.judge.device)
            if why:
                found.append(IntegrityCheck("output", "fail", why))
                continue
            t = opened[name] = open_shared(meta)
            for k, inp in inputs.items():
                if shares_memory(t, inp):
                    found.append(IntegrityCheck("output", "fail", f"{name} shares memory with the input {k} "
                                                                  "(a view or alias of an input)"))
        return opened, found

    def _same_inputs(self, draw: Draw) -> bool:
        return not self._mutated(draw)

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

    def _lane(self, lane: int) -> tuple[dict, Any]:
        """The memory of a lane's inputs and upstream gradient (lane 0: the subject's own)."""
        return self.lanes.mapped[lane] if self.lanes is not None else (self.mapped, self.mapped_grad)

    def graph_lanes(self, shared: list[dict], calls: int) -> Optional[Lanes]:
        """The lanes of the graph the hot loop replayed (None for a graph of one call): one for each of
        its calls, shaped like the subject's inputs, apart from each other and holding the values drawn
        from their seeds. Anything else is a subject process that broke the protocol (one that dropped
        lanes would have its calls read the same inputs again)."""
        if calls != 1 + len(shared):
            raise SubjectLost(f"the subject process broke the protocol: a graph of {calls} calls, {len(shared) + 1} lanes")
        if not shared:
            return None
        drawn = [self.judge.draw(self.family, self.case, seed, self.first) for seed in lane_seeds(self.settings.seed, calls)]
        self.lanes = Lanes((self.mapped, self.mapped_grad), shared, [self.first, *drawn])
        why = self.lanes.unlike() or next((f"lane {i} does not hold the values of its seed" for i in range(1, calls)
                                           if self._mutated(self.lanes.held[i], i)), "")
        if why:
            raise SubjectLost(f"the subject process broke the protocol: {why}")
        return self.lanes

    def _lanes_apart(self, reply: dict) -> list[IntegrityCheck]:
        """Every call of a judged replay wrote outputs of its own, apart from every other lane's memory."""
        groups = []
        for lane, (inputs, grad) in enumerate(self.lanes.mapped):
            outputs = lane_outputs(reply, lane, self.lanes.count) or {}
            groups.append([t for t in [*inputs.values(), grad] if t is not None]
                          + [open_shared(m) for m in outputs.values() if isinstance(m, dict) and "dtype" in m])
        why = overlap(groups)
        return [IntegrityCheck("output", "fail", why)] if why else []

    def _every_lane(self, taken: Any, check: Check) -> Check:
        """A checked replay's other lanes, each against the fp64 reference of the values the judge wrote
        into it (a draw no honest kernel can be held to is left out): the worst lane's check is the call's,
        so a graph whose calls skip their work in any lane fails at the first checked replay."""
        worst = check
        for i, (draw, got) in enumerate(zip(taken.held, taken.got)):
            if i == taken.lane:
                continue
            with self.phases("integrity/references"):
                reference = self.judge.reference(self.family, self.case, draw, keep=False)
                tolerance = self.draw_tolerance(draw, reference)
            if math.isfinite(tolerance):
                worst = max(worst, compare(got, reference, tolerance), key=_badness)
        return worst

    def _mutated(self, draw: Draw, lane: int = 0) -> str:
        """Which inputs differ from the values the judge wrote, bit for bit, and in how many elements ('' when
        none); one read back for all of them."""
        pending = self._mutation_counts(draw, lane)
        self.judge.sync()
        return described(pending)

    def _mutation_counts(self, draw: Draw, lane: int = 0) -> "MutationCounts":
        """`_mutated`'s comparison queued, its counts copied to host memory without waiting: read them with
        `described` after the judge's next synchronize (a judged call's last), so the comparison costs no
        synchronisation of its own."""
        mapped, mapped_grad = self._lane(lane)
        pairs = [(k, t, draw.inputs[k]) for k, t in mapped.items()]
        if mapped_grad is not None:
            pairs.append(("the upstream gradient", mapped_grad, draw.grad_out))
        if not pairs:
            return [], None
        counts = torch.stack([(_bits(t) != _bits(want)).sum() for _, t, want in pairs])
        if counts.is_cuda:
            host = torch.empty(counts.shape, dtype=counts.dtype, pin_memory=True)
            counts = host.copy_(counts, non_blocking=True)
        return [(name, t.numel()) for name, t, _ in pairs], counts


MutationCounts = tuple  # (each input's name and size, their changed elements' counts in host memory, once synchronised)


def described(pending: MutationCounts) -> str:
    """The inputs a judged call changed, from `_mutation_counts` once the judge has synchronised."""
    names, counts = pending
    if counts is None:
        return ""
    return "; ".join(f"{name} changed in {bad} of {size} elements"
                     for (name, size), bad in zip(names, counts.tolist()) if bad)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A floating tensor's bits as integers of its size (NaN equals the same NaN, -0.0 is not 0.0)."""
    if not t.is_floating_point():
        return t
    return t.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()])


def _badness(check: Check) -> float:
    """How far a check is past its tolerance (an output not written: furthest)."""
    worst = check.worst
    return float("inf") if worst != worst else worst / check.tolerance
