"""The subject's side of a measurement: what runs in the process that runs a subject's code.

`BlindRunner` holds a subject's op, its inputs and its timer, and nothing that judges it: no fp64
reference, no expected outputs, no tolerance, no verdict, and no flag that says whether a call is
checked or timed (cudabench.measure.judge holds those, in another process). It answers the judge's
requests one at a time:

    open      bind the op, make the inputs from the seed, share them (the judge writes every later
              set of input values into this memory itself, so nothing here runs when they change)
    forward   a backward's stored forward, made from the input values just written and before the judge
              writes the upstream gradient (direction bwd only): nothing it does can read that gradient
    call      one call after poisoning the outputs' memory, timed when a timer is prepared; its
              outputs are shared with the judge, which decides in its own process whether to check
              them. Every judged call is made the same way, so no state here tells them apart
    peak      one warm call with PyTorch's peak-memory counter reset
    hot       the timed loop on unchanged inputs (warm-up, timer, stop rule, clocks), then a short
              CUPTI pass for the kernel-time and integrity figures; under graph timing each call of the
              graph on inputs of its own (cudabench.measure.lanes), all shared with the judge
    round     a round of judged calls timed by CUPTI kernel time starts (one CUPTI session for the
              round); `samples` ends it and returns each call's kernel time, in call order
    order     the stream-order probe: the current stream held busy, the first inputs written back on
              it, one call and copies of its outputs made on it
    finish    process state restored; what the subject left behind (patched functions, changed
              settings, tracing hooks, threads) reported as observations

What it reports is what this process saw; the judge decides what it means."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Optional

import torch

from cudabench import nvtx
from cudabench.measure.clocks import ClockMonitor, L2Flusher, cold_hook, l2_bytes, settle_hook
from cudabench.measure.cupti_pass import cupti_pass
from cudabench.measure.lanes import footprint, room, shared_lanes
from cudabench.measure.loop import measure
from cudabench.measure.memory import allocated_bytes, peak_memory
from cudabench.measure.opened import Opened
from cudabench.measure.poison import poison
from cudabench.measure.process_hooks import cleared_trace
from cudabench.measure.settings import Settings
from cudabench.measure.subject import case_inputs
from cudabench.measure.stream_order import order_probe
from cudabench.measure.upkeep import Upkeep
from cudabench.measure.timers import CuptiRound, make_timer
from cudabench.measure.transport import share, share_outputs
from cudabench.results.exporters.json_document import measurement_to_dict
from cudabench.results.records.model import Case
from cudabench.results.records.stats import summarize
from cudabench.measure.threads import start_cpu_pool, thread_watch
from cudabench.spec import build as build_module
from cudabench.spec.build import build
from cudabench.spec.family import Family
from cudabench.spec.registry import Registry


# Judged calls of a call shorter than this follow an untimed call (see BlindRunner._warm); a longer
# call warms the GPU itself within a small share of its time (timex-v4 at 447 µs: 455 µs after 2 ms idle)
WARM_BELOW = 2e-3


# Blocks of each output's size poisoned before a judged call: the output's own, and scratch of that
# size the op takes beside it (uninitialised memory it reads then differs from call to call)
SCRATCH_COPIES = 4


def _replayed() -> Any:
    raise AssertionError("a graph timer replays what it captured; it never calls what it is handed")


class BlindRunner:
    """A subject process's state between requests. `device="cpu"` runs the logic without a GPU."""

    def __init__(self, registry: Registry, device: str = "cuda", timer_factory: Callable[[str], Any] = make_timer,
                 on_status: Callable[[str], None] = lambda s: None) -> None:
        from cudabench.measure.state import StateGuard

        self.registry = registry
        self.device = device
        self.timer_factory = timer_factory
        self.on_status = on_status
        self.modules: dict[str, Any] = {}
        self.subject: Optional[Opened] = None
        self._flusher: Optional[L2Flusher] = None
        start_cpu_pool()  # PyTorch's CPU threads, before the threads of the process are read
        self.threads = thread_watch()  # before the guard's snapshot, which then protects it
        self.guard = StateGuard(cuda=device == "cuda")
        # what a subject leaves in its place is compared; these change from one subject to the next
        # (the registry and the flusher are set by the harness only, which says so: see accept)
        self.upkeep = Upkeep(self.guard, self.threads, device)  # between subjects
        self.guard.objects.watch(self, changing=("subject", "_held_from"))
        self.guard.objects.watch(self.upkeep, changing=("settled", "broken"))
        self.guard.objects.watch(self.threads, changing=("folder", "started"))  # its methods, on the object too
        self.watch_registry()
        build_module.on_load(self.guard.objects.watch_loaded)  # each extension as it is made

    # ---- helpers ---------------------------------------------------------------------------------

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def module(self, family: Family, arch: Optional[str]) -> Any:
        if family.name in self.modules:  # a stand-in extension (tests)
            return self.modules[family.name]
        # built or not, asked each time: the sources' content decides which library runs, so an edit
        # between two subjects of a warm process is what the second one runs
        with nvtx.range(f"build {family.name}", "build"):
            return build(family, arch).module

    def _l2(self) -> int:
        return (l2_bytes() if self.device == "cuda" else 0) or 64 << 20

    def flusher(self) -> L2Flusher:
        if self._flusher is None:
            self._flusher = L2Flusher(self._l2())
            self.guard.objects.accept(self, "_flusher")  # made once: a subject's replacement shows
        return self._flusher

    def watch_registry(self) -> None:
        """The families, variants and baselines the subjects are bound from: a subject that replaced another's
        `bind` or `make` on the object would run its code in that one's open (framing it, or leaving threads
        a baseline is trusted with)."""
        self.guard.objects.watch(self.registry)
        for family in self.registry.families:
            for obj in (family, *family.variants, *family.baselines):
                self.guard.objects.watch(obj)

    def _opened(self) -> Opened:
        if self.subject is None:
            raise ValueError("no subject is open")
        return self.subject

    # ---- requests ----------------------------------------------------------------------------------

    def build(self, family_name: str, arch: Optional[str]) -> dict:
        self.upkeep.settled = False  # loading an extension runs its code
        family = self.registry.family(family_name)
        built = build(family, arch)
        return {"seconds": built.seconds, "cache_hit": built.cache_hit, "arch": built.arch,
                "directory": str(built.directory)}

    def open(self, family_name: str, case: Case, name: str, role: str, settings: Settings,
             outputs: list) -> dict:
        """Bind the op, make the inputs from the seed and share them. Raises CudabenchError when the
        subject cannot run here (the judge records it as skipped)."""
        self.close()
        self.upkeep.before_open()
        family = self.registry.family(family_name)
        self.threads.open(str(family.folder.resolve()) + "/")
        if role == "baseline":
            op = family.baseline(name).make()
        else:
            op = family.variant(name).bind(self.module(family, settings.arch))
        inputs, grad_out = case_inputs(family, case, settings.seed, self.device)
        self.subject = Opened(family, case, op, inputs, grad_out, settings, outputs, role)
        self._held_from = allocated_bytes() if self.device == "cuda" else 0
        shared = {k: share(v) for k, v in inputs.items() if torch.is_tensor(v)}
        return {"inputs": shared, "grad_out": None if grad_out is None else share(grad_out)}

    def poison(self) -> dict:
        """Before a judged call, and before the judge writes its inputs (so that the inputs, not the
        poison, are what the L2 holds, as in the hot loop): the previous outputs dropped, after the
        hot loop one untimed call on the values already there (the previous call's: see `_warm`),
        then the outputs' memory poisoned (NaN before the first call, random values after)."""
        s = self._opened()
        s.last = {}
        if (s.timer is not None or s.round is not None) and s.hot_median < WARM_BELOW:
            self._warm(s)
        poison(s.outputs, self.device, nan=s.first_call, gen=s.gen, copies=SCRATCH_COPIES)
        s.first_call = False
        self.sync()  # nothing of this process still reads the inputs when the judge writes them
        return {}

    def _warm(self, s: Opened) -> None:
        """A judged call follows a pause (the judge taking the last call, writing; it draws while this runs), after
        which the GPU is not what the hot loop left it: on an H200 an honest attention backward took
        351 µs back to back and 675 µs after 2 ms idle, its data gone from L2 or its clocks down. A
        call of the op just before, on the values the subject last saw, puts it back; a cache of the
        previous values then hits on a "same" judged call as in the hot loop, and misses on a new one."""
        if getattr(s.timer, "graph", None) is not None:
            s.timer.graph.replay()
        else:
            s.workload().call()

    def forward(self, eager: bool = False) -> dict:
        """A backward's forward from the input values just written (the forward graph replayed under
        graph timing), finished before the judge writes the upstream gradient: work moved into the
        forward cannot use the gradient the timed backward is given."""
        s = self._opened()
        if self._replays(s, eager):
            s.timer.refresh()
        else:
            s.pending = s.workload()
        self.sync()  # the whole device: a kernel left waiting for the gradient hangs (the watchdog)
        return {}

    def _replays(self, s: Opened, eager: bool) -> bool:
        return getattr(s.timer, "graph", None) is not None and s.round is None and not eager

    def call(self, eager: bool = False) -> dict:
        """One judged call (timed with the prepared timer, if any, unless `eager`), the device
        synchronised, its outputs shared. A graph replay runs no Python and reuses the graph's own
        memory, so reading uninitialised memory shows only in an eager call: the judge asks one for
        its determinism check under graph timing (the subject's code cannot act on that: its timed
        calls are replays, which run none of it, and nothing of it runs before them here either)."""
        s = self._opened()
        s.last = {}
        workload, s.pending = s.pending, None
        if workload is None and not self._replays(s, eager):
            workload = s.workload()
        timed = workload.call if workload is not None else _replayed
        sample = None
        if s.round is not None:
            got = s.round.call(timed, self._settle(s.settings))
        elif s.timer is not None and not eager:
            sample = s.timer.samples(timed, 1, self._settle(s.settings), keep=True)[0]
            got = s.timer.last
            s.timer.last = None
        else:
            got = timed()
        self.sync()
        if not isinstance(got, dict):
            got = {"out": got}
        s.last = got
        reply = {"sample": sample, "outputs": share_outputs(got)}
        if workload is None and s.lanes:  # a replay: every call's outputs, the judge reads one (lanes.py)
            reply["lanes"] = [share_outputs(o) for o in s.timer.statics[1:]]
        return reply

    def peak(self) -> dict:
        """One warm call's peak memory beyond what was allocated before the subject's first call. The
        check's outputs are dropped first (and blocks the judge has released are given back), so
        only this call's memory and what the subject keeps count."""
        s = self._opened()
        s.last = {}
        if self.device != "cuda":
            return {"peak_memory": -1}
        torch.cuda.ipc_collect()
        return {"peak_memory": peak_memory(s.workload().call, self.sync, self._held_from)}

    def hot(self) -> dict:
        """The timed loop on unchanged inputs, then the CUPTI pass; the timer stays prepared for the
        judged calls that follow."""
        s = self._opened()
        s.last = {}
        settings = s.settings
        on_gpu = self.device == "cuda"
        workload = s.workload()
        call = workload.call
        timer = self.timer_factory(settings.timing)
        if hasattr(timer, "before"):
            timer.before = workload.forward
        flush = self._cold_hook(settings)
        if flush is not None and hasattr(timer, "cap"):
            timer.cap = 1  # a graph of several calls would run all but the first with a warm L2
        if hasattr(timer, "lanes") and timer.before is None:  # graph timing, fwd or fwdbwd
            timer.lanes = lambda n: s.lane_calls(n, self.device)
            timer.cap = min(timer.cap, room(footprint(s.inputs, s.grad_out, s.outputs), self._l2()))
        timed_call = nvtx.around(call, "call")
        with ClockMonitor() if on_gpu else contextlib.nullcontext() as clocks:
            with nvtx.range("timed", "timed"):
                start = time.perf_counter()
                m = measure(timed_call, timer, settings.stop_rule, settings.warmup, self.sync, flush,
                            "cold" if flush else "hot", clocks.mark if clocks else None)
                # the samples only: not the warm-up and the timer's preparation (m.warmup_seconds), nor the
                # clock readings around the block (until 2026-11-28 counted here: 12 ms a subject on the H200)
                sampling = time.perf_counter() - start - m.warmup_seconds
        m = clocks.applied(m) if clocks else m  # each batch's clock; throttled samples left out
        s.timer = timer
        median = summarize(m.samples).median
        s.hot_median = median * m.calls_per_sample
        reply = {"measurement": measurement_to_dict(m), "sampling_seconds": sampling, "cupti": None,
                 "lanes": shared_lanes(s.lanes)}
        short = m.timing == "sync" and median < settings.kernel_time_below
        if on_gpu and (short or settings.integrity or s.family.report_launches):
            reply["cupti"] = cupti_pass(call, timer, m, short, self.timer_factory, self.sync, flush)
        return reply

    def round(self) -> dict:
        """The judged calls from now until `samples` are timed by their kernel time, in one CUPTI
        session (on the CPU, by the timer factory's cupti timer, one sample per call)."""
        s = self._opened()
        if self.device == "cuda":
            s.round = CuptiRound()
            s.round.start()
        else:
            s.timer = self.timer_factory("cupti")
            s.timer.prepare(s.workload().call, s.hot_median)
        return {}

    def samples(self) -> dict:
        """The round's kernel time and GPU busy time per call, in call order (None when each call's
        reply had its sample)."""
        s = self._opened()
        if s.round is None:
            return {"samples": None, "busy": None}
        calls, s.round = s.round.end(), None
        return {"samples": [c.seconds for c in calls], "busy": [c.busy for c in calls]}

    def order(self, hold: Optional[float] = None) -> dict:
        """The stream-order probe (cudabench.measure.stream_order), holding the stream `hold` seconds
        when the judge asks for a longer hold than the first probe's."""
        s = self._opened()
        s.last = {}
        s.last, held, issued = order_probe(s, self.sync, self.device == "cuda", hold)
        return {"outputs": share_outputs(s.last), "hold": held, "issued": issued}

    def finish(self) -> dict:
        """Drop the subject; report what it left behind (cudabench.measure.upkeep). A reply that is not
        healthy tells the judge to replace this process."""
        traced = cleared_trace()  # first: a trace function can make the harness's frames jump
        pool = self.threads.alive() if self.subject is not None else None  # a pool it holds ends with it
        trusted = self.subject is not None and self.subject.role == "baseline"
        self.close()  # the subject's outputs and a graph's pool go with it, before the collection
        return self.upkeep.after_subject(traced, pool, trusted)

    def close(self) -> None:
        if self.subject is not None and self.subject.round is not None:
            self.subject.round.end()  # a round the judge never ended (the subject failed in it)
        self.subject = None

    # ---- before a timed call (cudabench.measure.clocks) -------------------------------------------

    def _settle(self, settings: Settings) -> Optional[Callable[[], None]]:
        return settle_hook(self.device, self._cold_hook(settings))

    def _cold_hook(self, settings: Settings) -> Optional[Callable[[], None]]:
        if not settings.cold or self.device != "cuda":
            return None
        return cold_hook(self.flusher(), self.guard)
