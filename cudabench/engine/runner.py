"""A run: for each kernel family × case — constraints → build → check → measure — for the chosen
variants and baselines. A failure becomes a recorded skip with its reason, never an abort."""

from __future__ import annotations

import contextlib
import random
import statistics
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Optional, Sequence

from cudabench import nvtx
from cudabench.spec.build import build
from cudabench.measure.check import check_workload, reference_results
from cudabench.errors import CheckFailedError, CudabenchError, ShapeError
from cudabench.measure.clocks import ClockMonitor, L2Flusher
from cudabench.measure.loop import Adaptive, FixedCount, StopRule, Warmup, measure
from cudabench.results.model import Case, Check, Measurement, Result
from cudabench.spec.registry import Registry
from cudabench.spec.shapes import check_shape, complete_shape, violation
from cudabench.spec.family import Baseline, Family, Variant
from cudabench.results.stats import summarize
from cudabench.measure.timers import make_timer
from cudabench.measure.workload import make_workload


@dataclass(frozen=True)
class RunOptions:
    directions: Optional[tuple[str, ...]] = None   # None: fwd, plus fwdbwd where there is a backward
    baselines: Optional[tuple[str, ...]] = None    # None: the family's default baselines; () none
    timing: str = "sync"
    rule: StopRule = field(default_factory=Adaptive)
    warmup: Warmup = field(default_factory=Warmup)
    force: bool = False                             # time subjects that fail the check
    arch: Optional[str] = None
    seed: Optional[int] = None
    device: str = "cuda"                           # "cpu" only for tests of the run logic
    time: bool = True                               # False: check against the reference only
    inputs: str = "uniform"                         # input distribution (a family's input_kinds)
    renames: dict = field(default_factory=dict)     # record a subject's results under another name
    cold: bool = False                              # flush L2 before every timed call
    kernel_time_below: float = 100e-6               # also read CUPTI kernel time for calls this short
    ceilings: Any = None                            # cudabench.measure.ceilings.Ceilings of this GPU, if known


@dataclass(frozen=True)
class Task:
    """One family at one shape: the cases (directions) and subjects to run there."""

    family: Family
    cases: tuple[Case, ...]
    variants: tuple[Variant, ...]
    baselines: tuple[Baseline, ...]
    skipped: tuple[tuple[Variant, str], ...] = ()   # variants whose constraints the shape breaks


# ---- planning: everything that can be checked without a GPU ----------------------------------

def plan(registry: Registry, names: Sequence[str], shape: dict[str, int],
         options: RunOptions, strict: bool = True) -> list[Task]:
    """Resolve names, complete the shape, check constraints and directions. A variant named
    explicitly that cannot run at the shape is an error (`strict`, the default) or skipped like one
    implied by a family name."""
    picked = registry.resolve(names)
    families = list(dict.fromkeys(f for f, _ in picked))
    if len(families) > 1:  # each family takes the parameters it has; a name none has is an error
        known = {p.name for f in families for p in f.params}
        complete_shape(families[0], {k: v for k, v in shape.items() if k not in known})
    tasks = []
    for family in families:
        own = {p.name for p in family.params}
        given = {k: v for k, v in shape.items() if k in own or len(families) == 1}
        full = complete_shape(family, given)
        check_shape(family, None, full)
        variants, skipped = [], []
        for fam, variant in picked:
            if fam is not family:
                continue
            reason = violation(family, variant, full)
            if reason is None:
                variants.append(variant)
            elif strict and variant.name in names:
                check_shape(family, variant, full)  # raises with the full message
            else:
                skipped.append((variant, reason))
        directions = _directions(family, options.directions)
        if options.inputs not in family.input_kinds:
            raise ShapeError(f"{family.name} has no '{options.inputs}' inputs.",
                             f"Its input kinds: {', '.join(family.input_kinds)}.")
        cases = tuple(Case(family.name, tuple(full.items()), d, inputs=options.inputs) for d in directions)
        tasks.append(Task(family, cases, tuple(variants), _baselines(family, options.baselines),
                          tuple(skipped)))
    return tasks


def plan_single(registry: Registry, kernel: str, shape: dict[str, int], direction: str,
                inputs: str = "uniform") -> Task:
    """A task for exactly one kernel variant (commands that time or profile one thing)."""
    if kernel not in {v.name for _, v in registry.variants()} and kernel in {f.name for f in registry.families}:
        raise ShapeError(f"Name one kernel variant, not the family '{kernel}'.",
                         "`cudabench list` shows the variants, e.g. add2 or timex-v4.")
    if direction not in ("fwd", "bwd", "fwdbwd"):
        raise ShapeError(f"Unknown --direction '{direction}'.", "Choose fwd, bwd or fwdbwd.")
    return plan(registry, [kernel], shape, RunOptions(directions=(direction,), baselines=(), inputs=inputs))[0]


def _directions(family: Family, asked: Optional[tuple[str, ...]]) -> tuple[str, ...]:
    if asked is None:
        return ("fwd", "fwdbwd") if family.grad_inputs else ("fwd",)
    unknown = [d for d in asked if d not in ("fwd", "bwd", "fwdbwd")]
    if unknown:
        raise ShapeError(f"Unknown --direction '{unknown[0]}'.", "Choose fwd, bwd or fwdbwd.")
    missing = [d for d in asked if d not in family.directions]
    if missing:
        raise ShapeError(f"{family.name} has no backward, so it cannot run --direction {','.join(missing)}.",
                         "Use --direction fwd for it.")
    return asked


def _baselines(family: Family, asked: Optional[tuple[str, ...]]) -> tuple[Baseline, ...]:
    if asked is None:
        return tuple(b for b in family.baselines if b.default)
    if "all" in asked:
        return family.baselines
    chosen = []
    for name in asked:
        try:
            chosen.append(family.baseline(name))
        except KeyError:
            known = ", ".join(b.name for b in family.baselines) or "none"
            raise ShapeError(f"{family.name} has no baseline '{name}'.",
                             f"Its baselines: {known} (or 'all').") from None
    return tuple(chosen)


# ---- running -------------------------------------------------------------------------------------

def first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def case_data(family: Family, case: Case, seed: int, device: str = "cuda") -> tuple[dict, Any, dict]:
    """Fresh random inputs for the case, an upstream gradient when the direction has a backward,
    and the fp64 reference results on them."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    inputs = family.inputs(case.params, gen, device, case.inputs)
    grad_out = None
    if case.direction != "fwd":
        out64 = reference_results(family, inputs, "fwd")["out"]
        grad_out = torch.empty(out64.shape, device=device).uniform_(-1, 1, generator=gen)
    return inputs, grad_out, reference_results(family, inputs, case.direction, grad_out)


def checked_call(task: Task, seed: int, arch: Optional[str] = None) -> tuple[Callable[[], Any], Check]:
    """The timed call of the task's single subject (its variant, else its first baseline) on its
    first case, after it passed the correctness check. For commands that time one thing."""
    family, case = task.family, task.cases[0]
    if task.variants:
        op = task.variants[0].bind(build(family, arch).module)
        name = task.variants[0].name
    else:
        op, name = task.baselines[0].make(), task.baselines[0].name
    try:
        inputs, grad_out, reference = case_data(family, case, seed)
        workload = make_workload(op, inputs, case.direction, family.grad_inputs, grad_out)
        check = check_workload(workload, reference, family.tolerance)
    except (RuntimeError, ValueError, TypeError) as exc:  # a binding's TORCH_CHECK, a CUDA error, OOM
        raise CheckFailedError(f"{name} failed at {case.shape_text} ({case.direction}): {first_line(exc)}") from None
    if not check.passed:
        raise CheckFailedError(f"{name} fails the correctness check at {case.shape_text} ({case.direction}): "
                               f"error {check.worst:.3g} > tolerance {family.tolerance:g}; not timing it.",
                               f"`cudabench run --kernel {name}` shows each output's error.")
    return workload.call, check


@contextlib.contextmanager
def true_fp32() -> Iterator[None]:
    """TF32 off for cuBLAS and cuDNN while measuring, so every subject computes in fp32."""
    import torch

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


class Runner:
    def __init__(self, options: RunOptions, on_result: Callable[[Result], None] = lambda r: None,
                 on_status: Callable[[str], None] = lambda s: None,
                 timer_factory: Callable[[str], Any] = make_timer) -> None:
        self.options = options
        self.timer_factory = timer_factory
        self.on_result = on_result
        self.on_status = on_status
        self.results: list[Result] = []
        self._l2_flusher: Any = None
        self.seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)

    def run(self, tasks: Sequence[Task]) -> list[Result]:
        with true_fp32():
            for task in tasks:
                self._run_task(task)
        return self.results

    def _record(self, result: Result) -> None:
        if result.subject in self.options.renames:
            result = replace(result, subject=self.options.renames[result.subject])
        self.results.append(result)
        self.on_result(result)

    def _run_task(self, task: Task) -> None:
        for variant, reason in task.skipped:
            for case in task.cases:
                self._record(Result(case, variant.name, "variant", skipped=f"constraint: {reason}"))
        ext = None
        if task.variants:
            self.on_status(f"building {task.family.name}")
            try:
                with nvtx.range(f"build {task.family.name}", "build"):
                    built = build(task.family, self.options.arch)
                ext = built.module
                self.on_status(f"built {task.family.name} in {built.seconds:.1f} s "
                               f"({'cache hit' if built.cache_hit else 'compiled'})")
            except CudabenchError as exc:
                for variant in task.variants:
                    for case in task.cases:
                        self._record(Result(case, variant.name, "variant", skipped=f"build failed: {exc.message}"))
        for case in task.cases:
            with nvtx.range(f"case {case.key()}", "case"):
                self._run_case(task, case, ext)

    def _run_case(self, task: Task, case: Case, ext: Any) -> None:
        family = task.family
        subjects: list[tuple[str, str, Callable[[], Any]]] = []
        if ext is not None:
            subjects += [(v.name, "variant", lambda v=v: v.bind(ext)) for v in task.variants]
        subjects += [(b.name, "baseline", b.make) for b in task.baselines]
        if not subjects:
            return
        self.on_status(f"{case.key()}: fresh inputs and fp64 reference")
        try:
            with nvtx.range("reference", "check"):
                inputs, grad_out, reference = case_data(family, case, self.seed, self.options.device)
            flops, nbytes = family.work(case.params, case.direction) if family.work else (0.0, 0.0)
        except (RuntimeError, ValueError, TypeError, KeyError, CudabenchError) as exc:  # e.g. out of memory
            why = f"inputs or fp64 reference failed: {first_line(exc)}"
            for name, role, _ in subjects:
                self._record(Result(case, name, role, skipped=why))
            return
        for name, role, make_op in subjects:
            self.on_status(f"{case.key()}: {name}")
            with nvtx.range(name, "baseline" if role == "baseline" else "case"):
                result = self._run_subject(family, case, name, role, make_op, inputs, grad_out, reference)
            self._record(self._with_ceiling(family, replace(result, flops=flops, bytes=nbytes)))
        del reference, inputs

    def _measure(self, call: Callable[[], Any], name: str, count_launches: bool = False) -> Measurement:
        """Time `call` with the chosen timer (hot or cold), watching the clocks; for a call shorter
        than `kernel_time_below` also read its CUPTI kernel time, so launch cost is never
        mistaken for kernel time (and with `count_launches`, the kernels per call)."""
        import torch

        on_gpu = self.options.device == "cuda"
        sync = torch.cuda.synchronize if on_gpu else (lambda: None)
        flush = self._flusher() if self.options.cold else None
        timer = self.timer_factory(self.options.timing)
        if flush is not None and hasattr(timer, "cap"):
            timer.cap = 1  # a graph of several calls would run all but the first with a warm L2
        call = nvtx.around(call, f"{name} call")
        with ClockMonitor() if on_gpu else contextlib.nullcontext() as clocks:
            with nvtx.range(f"timed {name}", "timed"):
                m = measure(call, timer, self.options.rule, self.options.warmup, sync, flush,
                            "cold" if flush else "hot")
        extra = []
        median = summarize(m.samples).median
        short = m.timing == "sync" and median < self.options.kernel_time_below  # launch-dominated wall time
        if on_gpu and (short or count_launches):
            cupti = self.timer_factory("cupti")
            kernel = summarize(measure(call, cupti, FixedCount(30 if short else 10), Warmup(3, 0.0), sync,
                                       flush).samples)
            if short and kernel.median > 0:
                extra += [("kernel_time_cupti", kernel.median), ("launch_and_sync_overhead", median - kernel.median)]
            if count_launches and cupti.counts:
                extra.append(("kernels_per_call", float(statistics.median(cupti.counts))))
        return replace(m, clocks=clocks.pairs() if clocks else (), extra=tuple(extra))

    def _with_ceiling(self, family: Family, result: Result) -> Result:
        """Add the share of the device ceiling that bounds the family (from the kernel time when
        the per-call figure is mostly launch)."""
        if self.options.ceilings is None or not family.bound or result.stats is None:
            return result
        extra = dict(result.measurement.extra)
        seconds = extra.get("kernel_time_cupti", result.stats.median)
        share = self.options.ceilings.of(family.bound, result.flops, result.bytes, seconds)
        if share is None:
            return result
        extra["ceiling_fraction"] = share
        return replace(result, measurement=replace(result.measurement, extra=tuple(extra.items())))

    def _flusher(self) -> Any:
        if self._l2_flusher is None:
            import torch

            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            self._l2_flusher = L2Flusher(int(getattr(props, "L2_cache_size", 0)) or 64 << 20)
        return self._l2_flusher

    def _run_subject(self, family: Family, case: Case, name: str, role: str, make_op: Callable[[], Any],
                     inputs: dict, grad_out: Any, reference: dict) -> Result:
        check: Optional[Check] = None
        try:
            op = make_op()
            workload = make_workload(op, inputs, case.direction, family.grad_inputs, grad_out)
            with nvtx.range(f"check {name}", "check"):
                check = check_workload(workload, reference, family.tolerance)
            if not check.passed and not self.options.force:
                return Result(case, name, role, check=check, skipped=(
                    f"failed the check: error {check.worst:.3g} > tolerance {family.tolerance:g}"))
            if not self.options.time:
                return Result(case, name, role, check=check)
            m = self._measure(workload.call, name, family.report_launches)
            return Result(case, name, role, check=check, measurement=m, stats=summarize(m.samples))
        except CudabenchError as exc:
            return Result(case, name, role, check=check, skipped=exc.message)
        except (RuntimeError, ValueError, TypeError) as exc:  # CUDA or binding errors: record, go on
            return Result(case, name, role, check=check, skipped=f"error: {first_line(exc)}")

