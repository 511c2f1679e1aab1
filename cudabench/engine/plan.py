"""Planning a run, with no GPU: resolve kernel names, complete and check shapes, pick directions
and baselines, and list the subjects (a variant or baseline at one case) to hand to workers. The
plan a run executes is a PlannedRun: plain records (a family by name, no Family object), so that a
plan kept from an earlier invocation (engine/plan_cache.py) is run without importing any spec.py,
nor the torch each one imports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

from cudabench.errors import ShapeError
from cudabench.measure.loop import Warmup
from cudabench.measure.stop import Adaptive, StopRule, rule_to_dict
from cudabench.measure.settings import Settings
from cudabench.results.exporters.json_document import source_hash
from cudabench.results.records.model import Case
from cudabench.spec.family import DTYPES, Baseline, Family, Variant
from cudabench.spec.registry import Registry
from cudabench.spec.shapes import check_shape, complete_shape, violation

# The slowest shipped subject (conv1d forward+backward on a large sweep shape: ~40 ms a call, its
# warm-up, 2 s of sampling, the check, the CUPTI pass and the integrity re-checks) takes well under
# a minute; five minutes leaves room for slower GPUs and longer --min-time/--max-time.
DEFAULT_TIMEOUT = 300.0


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
    time: bool = True                               # False: check against the reference only
    inputs: str = "uniform"                         # input distribution (a family's input_kinds)
    dtypes: Optional[tuple[str, ...]] = None        # precisions, each a case of its own; None: float32
    renames: dict = field(default_factory=dict)     # record a subject's results under another name
    cold: bool = False                              # flush L2 before every timed call
    kernel_time_below: float = 100e-6               # also read CUPTI kernel time for calls this short
    integrity: bool = True                          # the integrity checks after timing
    fuzz: int = 2                                   # random shapes each variant is also checked at
    timeout: float = DEFAULT_TIMEOUT                # seconds per subject before the watchdog kills it
    nvtx: bool = False
    nvtx_iterations: bool = False

    def settings(self, seed: int) -> Settings:
        """What a worker needs to treat a subject as asked."""
        return Settings(timing=self.timing, rule=rule_to_dict(self.rule), warmup_calls=self.warmup.calls,
                        warmup_seconds=self.warmup.seconds, force=self.force, time=self.time, cold=self.cold,
                        integrity=self.integrity, fuzz=self.fuzz, seed=seed, arch=self.arch,
                        kernel_time_below=self.kernel_time_below, nvtx=self.nvtx,
                        nvtx_iterations=self.nvtx_iterations)


@dataclass(frozen=True)
class Task:
    """One family at one shape: the cases (directions) and subjects to run there."""

    family: Family
    cases: tuple[Case, ...]
    variants: tuple[Variant, ...]
    baselines: tuple[Baseline, ...]
    skipped: tuple[tuple[Variant, str], ...] = ()   # variants whose constraints the shape breaks


# ---- planning: everything that can be checked without a GPU ----------------------------------

def plan_shapes(registry: Registry, names: Sequence[str], shapes: Sequence[dict[str, int]],
                options: RunOptions) -> list[Task]:
    """plan() at each of several shapes (a repeated --shape), in the order given. A family planned at the
    same cases twice (a shape of parameters it does not have leaves it at its defaults) is planned once."""
    tasks: list[Task] = []
    for shape in shapes:
        tasks += [task for task in plan(registry, names, shape, options)
                  if all((task.family.name, task.cases) != (kept.family.name, kept.cases) for kept in tasks)]
    return tasks


def plan(registry: Registry, names: Sequence[str], shape: dict[str, int],
         options: RunOptions, strict: bool = True) -> list[Task]:
    """Resolve names, complete the shape, check constraints and directions. A variant named
    explicitly that cannot run at the shape is an error (`strict`, the default) or skipped like one
    implied by a family name."""
    if not [n for n in names if n.strip()]:
        raise ShapeError("No kernel named: --kernel was given no name.", "`cudabench list` shows the kernels.")
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
        if options.inputs not in family.all_input_kinds:
            raise ShapeError(f"{family.name} has no '{options.inputs}' inputs.",
                             f"Its input kinds: {', '.join(family.all_input_kinds)}.")
        dtypes = options.dtypes or ("float32",)
        check_dtypes(family, dtypes)
        cases = tuple(Case(family.name, tuple(full.items()), d, dtype=t, inputs=options.inputs)
                      for t in dtypes for d in directions)
        tasks.append(Task(family, cases, tuple(variants), _baselines(family, options.baselines),
                          tuple(skipped)))
    return tasks


def plan_single(registry: Registry, kernel: str, shape: dict[str, int], direction: str,
                inputs: str = "uniform", dtype: Optional[str] = None) -> Task:
    """A task for exactly one kernel variant (commands that time or profile one thing), in `dtype`, by
    default the first precision the variant takes (float32, or bfloat16 for a tensor-core-only one)."""
    variants = {v.name: v for _, v in registry.variants()}
    if kernel not in variants and kernel in {f.name for f in registry.families}:
        raise ShapeError(f"Name one kernel variant, not the family '{kernel}'.",
                         "`cudabench list` shows the variants, e.g. add2 or timex-v4.")
    if direction not in ("fwd", "bwd", "fwdbwd"):
        raise ShapeError(f"Unknown --direction '{direction}'.", "Choose fwd, bwd or fwdbwd.")
    if kernel in variants:
        takes = variants[kernel].dtypes
        dtype = dtype or takes[0]
        if dtype in DTYPES and dtype not in takes:
            raise ShapeError(f"{kernel} takes {', '.join(takes)}, not {dtype}.", f"Use --dtype {takes[0]}.")
    dtype = dtype or "float32"  # an unknown kernel: plan() says so, with close names
    task = plan(registry, [kernel], shape, RunOptions(directions=(direction,), baselines=(), inputs=inputs,
                                                      dtypes=(dtype,)))[0]
    if direction != "fwd" and not task.variants[0].has_backward:
        raise ShapeError(f"{kernel} declares no backward, so it cannot run --direction {direction}.",
                         "Use --direction fwd for it.")
    return task


def check_dtypes(family: Family, dtypes: Sequence[str]) -> None:
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise ShapeError(f"Unknown dtype '{dtype}'.", f"Choose from {', '.join(DTYPES)}.")
        if dtype not in family.dtypes:
            raise ShapeError(f"{family.name} has no {dtype} inputs.", f"Its dtypes: {', '.join(family.dtypes)}.")


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


@dataclass(frozen=True)
class Subject:
    """One variant or baseline at one case: what a worker runs."""

    family: Family
    case: Case
    name: str
    role: str                       # "variant" | "baseline"


NO_BACKWARD = "constraint: declares no backward, so it has no {direction}"
NO_DTYPE = "dtype: {name} supports {dtypes} only"


def subjects(task: Task, case: Case) -> list[Subject]:
    """What runs at this case: the task's variants and baselines, less those without a backward
    when the direction needs one (see skips)."""
    return ([Subject(task.family, case, v.name, "variant") for v in task.variants if _runs(v, case)]
            + [Subject(task.family, case, b.name, "baseline") for b in task.baselines if _runs(b, case)])


def skips(task: Task, case: Case) -> list[tuple[str, str, str]]:
    """(name, role, reason) of what is planned but cannot run at this case: constraints the shape
    breaks, a precision it does not take, a missing backward for bwd/fwdbwd. All decided here,
    never by a worker."""
    found = [(v.name, "variant", f"constraint: {reason}") for v, reason in task.skipped]
    found += [(v.name, "variant", _why_not(v, case)) for v in task.variants if not _runs(v, case)]
    found += [(b.name, "baseline", _why_not(b, case)) for b in task.baselines if not _runs(b, case)]
    return found


def _runs(subject: Variant | Baseline, case: Case) -> bool:
    return case.dtype in subject.dtypes and (case.direction == "fwd" or subject.has_backward)


def _why_not(subject: Variant | Baseline, case: Case) -> str:
    if case.dtype not in subject.dtypes:
        return NO_DTYPE.format(name=subject.name, dtypes=", ".join(subject.dtypes))
    return NO_BACKWARD.format(direction=case.direction)


def expected_seconds(s: Subject) -> float:
    """A rough guess of one call's time from the family's flop and byte counts (H100-like rates):
    only the order matters, to start the longest subjects first."""
    if s.family.work is None:
        return 0.0
    try:
        flops, moved = s.family.work(s.case.params, s.case.direction)
    except Exception:  # noqa: BLE001 - a guess; a family's own bug shows when it runs
        return 0.0
    return flops / 50e12 + moved / 3e12


@dataclass(frozen=True)
class Planned:
    """One entry of a run's plan: a subject to run, or one planned but skipped (with why)."""

    family: str
    case: Case
    name: str
    role: str                       # "variant" | "baseline"
    skipped: str = ""
    expected_seconds: float = 0.0


@dataclass(frozen=True)
class PlannedRun:
    """Everything a run executes, in plan order, and each family's source hash (for the results)."""

    entries: tuple[Planned, ...]
    source_hashes: tuple[tuple[str, str], ...] = ()

    @property
    def names(self) -> set[str]:
        return {e.name for e in self.entries}


def as_plan(plan: "PlannedRun | Sequence[Task]") -> PlannedRun:
    """What a runner runs: a plan as it is, or tasks planned now."""
    return plan if isinstance(plan, PlannedRun) else planned_run(plan)


def longest_first(item: tuple[int, Planned]) -> tuple[float, bool, int]:
    """The order subjects are handed to several GPUs: the longest expected first, a baseline before
    a variant of the same length, then plan order."""
    position, entry = item
    return (-entry.expected_seconds, entry.role != "baseline", position)


def planned_run(tasks: Sequence[Task]) -> PlannedRun:
    """The tasks' cases, each with its skips first and then its subjects."""
    entries: list[Planned] = []
    for task in tasks:
        for case in task.cases:
            entries += [Planned(task.family.name, case, name, role, skipped=reason)
                        for name, role, reason in skips(task, case)]
            entries += [Planned(task.family.name, case, s.name, s.role, expected_seconds=expected_seconds(s))
                        for s in subjects(task, case)]
    hashes = {t.family.name: source_hash(t.family) for t in tasks}
    return PlannedRun(tuple(entries), tuple(hashes.items()))
