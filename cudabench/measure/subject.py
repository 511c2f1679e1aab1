"""One subject (a variant or a baseline at one case), inside a worker process, as named phases:
fresh inputs → correctness check → timing (with clocks watched) → a short CUPTI pass → integrity
checks → process state restored. `Bench` holds what a worker keeps between subjects: built
extensions, the fp64 reference of the current case, the L2 flusher, the device's ceilings and the
pristine process state."""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import replace
from typing import Any, Callable, Iterator, Optional

from cudabench import nvtx
from cudabench.errors import CheckFailedError, CudabenchError
from cudabench.measure import integrity
from cudabench.measure.check import check_workload, reference_results
from cudabench.measure.clocks import ClockMonitor, L2Flusher
from cudabench.measure.loop import Warmup, measure
from cudabench.measure.memory import allocated_bytes, peak_memory
from cudabench.measure.settings import Settings
from cudabench.measure.stop import FixedCount
from cudabench.measure.timers import make_timer, sleep_cycles
from cudabench.measure.workload import Workload, make_workload
from cudabench.results.model import Case, Check, IntegrityCheck, Measurement, Result
from cudabench.results.stats import summarize
from cudabench.spec.build import build
from cudabench.spec.family import Family
from cudabench.spec.registry import Registry


def first_line(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def case_data(family: Family, case: Case, seed: int, device: str = "cuda") -> tuple[dict, Any, dict]:
    """Fresh random inputs for the case, an upstream gradient when the direction has a backward,
    and the fp64 reference results on them."""
    inputs, grad_out = case_inputs(family, case, seed, device)
    return inputs, grad_out, reference_results(family, inputs, case.direction, grad_out)


def case_inputs(family: Family, case: Case, seed: int, device: str = "cuda") -> tuple[dict, Any]:
    """The same seed gives the same values: every subject of a case gets its own fresh copy. The
    family makes float32 inputs; a case in a lower precision rounds them to it (the fp64 reference
    then sees the rounded values), and its upstream gradient comes in that precision too."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    made = family.inputs(case.params, gen, device, case.inputs)
    inputs = in_dtype(made, case.dtype)
    grad_out = None
    if case.direction != "fwd":
        grad_out = torch.empty(output_shape(family, made), device=device).uniform_(-1, 1, generator=gen)
        grad_out = grad_out.to(getattr(torch, case.dtype))
    return inputs, grad_out


def in_dtype(inputs: dict, dtype: str) -> dict:
    """Floating-point tensors rounded to `dtype`; everything else as it is."""
    import torch

    if dtype == "float32":
        return inputs
    target = getattr(torch, dtype)
    return {k: (v.to(target) if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in inputs.items()}


def output_shape(family: Family, inputs: dict) -> tuple[int, ...]:
    """The forward output's shape: the reference run once on the family's float32 inputs (the shape
    does not depend on the precision, and float64 can be many times slower)."""
    return tuple(make_workload(family.reference, inputs, "fwd").results()["out"].shape)


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


PHASES = ("inputs", "reference", "check", "warm-up", "sampling", "integrity")


class Phases:
    """Wall time per named phase of one subject. The GPU is synchronised at each boundary, so work
    queued in one phase (an fp64 reference) is not counted in the next (the check that waits for it)."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self.sync = sync
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self.sync()
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, seconds)


class Bench:
    """A worker's state between subjects. `device="cpu"` runs the logic without a GPU (tests)."""

    def __init__(self, registry: Registry, device: str = "cuda", timer_factory: Callable[[str], Any] = make_timer,
                 ceilings: Any = None, on_status: Callable[[str], None] = lambda s: None) -> None:
        from cudabench.measure.state import StateGuard

        self.registry = registry
        self.device = device
        self.timer_factory = timer_factory
        self.ceilings = ceilings
        self.on_status = on_status
        self.modules: dict[str, Any] = {}
        self._references: dict[tuple[str, int], dict] = {}  # (case key, seed) -> fp64 reference
        self._flusher: Any = None
        self.guard = StateGuard(cuda=device == "cuda")

    # ---- what a subject needs ----------------------------------------------------------------

    def module(self, family: Family, arch: Optional[str]) -> Any:
        if family.name not in self.modules:
            with nvtx.range(f"build {family.name}", "build"):
                self.modules[family.name] = build(family, arch).module
        return self.modules[family.name]

    def make_op(self, family: Family, name: str, role: str, arch: Optional[str]) -> Callable[..., Any]:
        if role == "baseline":
            return family.baseline(name).make()
        return family.variant(name).bind(self.module(family, arch))

    def reference(self, family: Family, case: Case, seed: int, inputs: dict, grad_out: Any) -> dict:
        """The fp64 reference of this case on the inputs drawn from `seed`, computed once for all its
        subjects (the stale-output check's refreshed inputs have a seed of their own)."""
        key = (case.key(), seed)
        if key not in self._references:
            if any(k[0] != key[0] for k in self._references):
                self._references.clear()  # free the previous case's references first
            with nvtx.range("reference", "check"):
                self._references[key] = reference_results(family, inputs, case.direction, grad_out)
        return self._references[key]

    def flusher(self) -> Any:
        if self._flusher is None:
            import torch

            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            self._flusher = L2Flusher(int(getattr(props, "L2_cache_size", 0)) or 64 << 20)
        return self._flusher

    def sync(self) -> Callable[[], None]:
        import torch

        return torch.cuda.synchronize if self.device == "cuda" else (lambda: None)

    # ---- one subject ---------------------------------------------------------------------------

    def run(self, family: Family, case: Case, name: str, role: str, settings: Settings) -> Result:
        """Check, time and verify one subject. A CUDA or binding error propagates (the worker
        records it and decides whether its context survived)."""
        flops, nbytes = work_of(family.work, case)
        base = Result(case, name, role, flops=flops, bytes=nbytes)
        phases = Phases(self.sync())
        try:
            with nvtx.range(name, "baseline" if role == "baseline" else "case"):
                result = self._run(family, case, base, settings, phases)
            return replace(result, phases=tuple(phases.seconds.items()))
        finally:
            self.guard.restore()  # whatever happened, the next subject starts from the pristine state

    def _run(self, family: Family, case: Case, base: Result, settings: Settings, phases: Phases) -> Result:
        try:
            op = self.make_op(family, base.subject, base.role, settings.arch)
        except CudabenchError as exc:
            return replace(base, skipped=exc.message)
        with phases("inputs"):
            inputs, grad_out = case_inputs(family, case, settings.seed, self.device)
        with phases("reference"):
            reference = self.reference(family, case, settings.seed, inputs, grad_out)
        workload = make_workload(op, inputs, case.direction, family.grad_inputs, grad_out)
        self.on_status(f"{case.key()}: checking {base.subject}")
        held_from = allocated_bytes() if self.device == "cuda" else 0  # before the subject's first call
        with nvtx.range(f"check {base.subject}", "check"), phases("check"):
            check = check_workload(workload, reference, family.tolerance_for(case.dtype))
        result = replace(base, check=check)
        if not check.passed and not settings.force:
            return replace(result, skipped=f"failed the check: error {check.worst:.3g} > tolerance {family.tolerance_for(case.dtype):g}")
        if not settings.time:
            return result
        if self.device == "cuda":
            with phases("check"):  # one more warm call, like the timed ones
                result = replace(result, peak_memory=peak_memory(workload.call, self.sync(), held_from))
        self.on_status(f"{case.key()}: timing {base.subject}")
        pristine = ({k: v.detach().clone() for k, v in inputs.items() if _is_tensor(v)},
                    None if grad_out is None else grad_out.clone())
        m, cupti = self._measure(workload.call, base.subject, settings, family.report_launches or settings.integrity,
                                 phases)
        result = self._with_ceiling(family, replace(result, measurement=m, stats=summarize(m.samples)))
        if settings.integrity and self.device == "cuda":
            self.on_status(f"{case.key()}: integrity of {base.subject}")
            with phases("integrity"):
                checks = self._integrity(family, case, op, inputs, grad_out, pristine, reference, check, settings,
                                         result, cupti)
            result = replace(result, integrity=checks)
        return result

    def _measure(self, call: Callable[[], Any], name: str, settings: Settings,
                 want_cupti: bool, phases: Optional[Phases] = None) -> tuple[Measurement, Any]:
        """Time `call` with the chosen timer (hot or cold), watching the clocks; then a short CUPTI
        pass: kernel time for calls shorter than `kernel_time_below` (so launch cost is never
        mistaken for kernel time), kernels per call, and what the integrity checks compare."""
        on_gpu = self.device == "cuda"
        sync = self.sync()
        flush = self.flusher() if settings.cold else None
        timer = self.timer_factory(settings.timing)
        if flush is not None and hasattr(timer, "cap"):
            timer.cap = 1  # a graph of several calls would run all but the first with a warm L2
        timed_call = nvtx.around(call, f"{name} call")
        phases = phases or Phases(sync)
        start = time.perf_counter()
        with ClockMonitor() if on_gpu else contextlib.nullcontext() as clocks:
            with nvtx.range(f"timed {name}", "timed"):
                m = measure(timed_call, timer, settings.stop_rule, settings.warmup, sync, flush,
                            "cold" if flush else "hot")
        phases.add("warm-up", m.warmup_seconds)
        phases.add("sampling", time.perf_counter() - start - m.warmup_seconds)
        m = replace(m, clocks=clocks.pairs() if clocks else ())
        median = summarize(m.samples).median
        short = m.timing == "sync" and median < settings.kernel_time_below  # launch-dominated wall time
        if not on_gpu or not (short or want_cupti):
            return m, None
        if m.timing == "cupti":  # the timer itself recorded what the checks need
            cupti, kernel = timer, summarize(m.samples)
        else:
            cupti = self.timer_factory("cupti")
            count = 30 if short else max(5, min(20, int(0.2 / max(median, 1e-6))))
            with phases("integrity"):  # the CUPTI pass serves the integrity checks (and kernel time)
                kernel = summarize(measure(call, cupti, FixedCount(count), Warmup(3, 0.0), sync, flush).samples)
        extra = []
        if short and kernel.median > 0:
            extra += [("kernel_time_cupti", kernel.median), ("launch_and_sync_overhead", median - kernel.median)]
        if cupti.counts:
            extra.append(("kernels_per_call", float(statistics.median(cupti.counts))))
        return replace(m, extra=tuple(extra)), cupti

    def _with_ceiling(self, family: Family, result: Result) -> Result:
        """Add the share of the device ceiling that bounds the family (from the kernel time when
        the per-call figure is mostly launch)."""
        if self.ceilings is None or not family.bound or result.stats is None:
            return result
        extra = dict(result.measurement.extra)
        flops, nbytes = own_work(family, result.case, result)
        share = self.ceilings.of(family.bound, flops, nbytes, figure(result), result.case.dtype)
        if share is None:
            return result
        extra["ceiling_fraction"] = share
        return replace(result, measurement=replace(result.measurement, extra=tuple(extra.items())))

    # ---- integrity -------------------------------------------------------------------------------

    def _integrity(self, family: Family, case: Case, op: Any, inputs: dict, grad_out: Any, pristine: tuple,
                   reference: dict, check: Check, settings: Settings, result: Result,
                   cupti: Any) -> tuple[IntegrityCheck, ...]:
        import torch

        checks = [self._stale_output(family, case, op, inputs, grad_out, check, settings),
                  self._stream_order(family, case, op, inputs, grad_out, pristine, reference, check, result)]
        checks.append(integrity.timed_window(result.stats.median, cupti.busy if cupti else [], settings.timing))
        checks.append(integrity.no_work(cupti.counts if cupti else [], result.flops, result.bytes))
        l2 = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0))
        flops, nbytes = own_work(family, case, result)
        checks.append(integrity.impossible(figure(result), flops, nbytes, self.ceilings, l2, settings.cold,
                                           case.dtype))
        leftover = self.guard.restore()
        checks.append(integrity.process_state(leftover.patched, leftover.changed, settings.cold))
        return tuple(checks)

    def _stale_output(self, family: Family, case: Case, op: Any, inputs: dict, grad_out: Any, check: Check,
                      settings: Settings) -> IntegrityCheck:
        """Refill the inputs in place with new values; the call must follow them."""
        import torch

        try:
            fresh, fresh_grad = case_inputs(family, case, settings.seed + 1, self.device)
            with torch.no_grad():
                _copy_into(inputs, fresh, grad_out, fresh_grad)
            del fresh
            new_reference = self.reference(family, case, settings.seed + 1, inputs, grad_out)
            again = check_workload(make_workload(op, inputs, case.direction, family.grad_inputs, grad_out),
                                   new_reference, family.tolerance_for(case.dtype))
        except (RuntimeError, ValueError, TypeError) as exc:
            if _context_broken():
                raise
            return integrity.failed_call("stale-output", exc)
        return integrity.from_check("stale-output", again, check.worst, integrity.STALE_WHAT)

    def _stream_order(self, family: Family, case: Case, op: Any, inputs: dict, grad_out: Any, pristine: tuple,
                      reference: dict, check: Check, result: Result) -> IntegrityCheck:
        """Hold the current stream busy, write the original inputs back on it, call, and copy the
        outputs on it: only work ordered on the current stream sees the right inputs and is done
        before the copy."""
        import torch

        from cudabench.spec.family import poisoned_outputs

        hold = max(5e-3, 3 * result.stats.median * result.measurement.calls_per_sample)
        try:
            torch.cuda.synchronize()
            torch.cuda._sleep(sleep_cycles(min(hold, 1.0)))
            with torch.no_grad():
                _copy_into(inputs, pristine[0], grad_out, pristine[1])
            workload = make_workload(op, inputs, case.direction, family.grad_inputs, grad_out)
            with poisoned_outputs():
                got = workload.results()
            copies = {k: v.detach().clone() for k, v in got.items()}
            torch.cuda.synchronize()
            again = _compare(copies, reference, family.tolerance_for(case.dtype))
        except (RuntimeError, ValueError, TypeError) as exc:
            if _context_broken():
                raise
            return integrity.failed_call("stream-order", exc)
        return integrity.from_check("stream-order", again, check.worst, integrity.ORDER_WHAT)

    # ---- one checked call, for commands that time one thing -------------------------------------

    def checked_call(self, family: Family, case: Case, name: str, role: str, seed: int,
                     arch: Optional[str] = None) -> tuple[Callable[[], Any], Check]:
        """The call of one subject after it passed the correctness check (compare-sync-modes, profile)."""
        op = self.make_op(family, name, role, arch)
        try:
            inputs, grad_out = case_inputs(family, case, seed, self.device)
            reference = self.reference(family, case, seed, inputs, grad_out)
            workload = make_workload(op, inputs, case.direction, family.grad_inputs, grad_out)
            check = check_workload(workload, reference, family.tolerance_for(case.dtype))
        except (RuntimeError, ValueError, TypeError) as exc:  # a binding's TORCH_CHECK, a CUDA error, OOM
            raise CheckFailedError(f"{name} failed at {case.shape_text} ({case.direction}): {first_line(exc)}") from None
        if not check.passed:
            raise CheckFailedError(f"{name} fails the correctness check at {case.shape_text} ({case.direction}): "
                                   f"error {check.worst:.3g} > tolerance {family.tolerance_for(case.dtype):g}; not timing it.",
                                   f"`cudabench run --kernel {name}` shows each output's error.")
        return workload.call, check


def figure(result: Result) -> float:
    """The per-call time the table's throughput uses: CUPTI kernel time when the per-call figure is
    mostly launch, else the median."""
    extra = dict(result.measurement.extra) if result.measurement else {}
    return extra.get("kernel_time_cupti", result.stats.median if result.stats else 0.0)


def own_work(family: Family, case: Case, result: Result) -> tuple[float, float]:
    """The work a subject's algorithm must do: its variant's or baseline's own count where it
    declares one, else the family's."""
    try:
        subject = family.variant(result.subject) if result.role == "variant" else family.baseline(result.subject)
    except KeyError:  # recorded under another name (--record-as)
        return result.flops, result.bytes
    if subject.work is not None:
        return work_of(subject.work, case)
    return result.flops, result.bytes


def work_of(work: Any, case: Case) -> tuple[float, float]:
    """(flops, bytes) of one call from a spec's count, which counts float32 elements (4 bytes):
    bytes scale with the case's element size."""
    if work is None:
        return 0.0, 0.0
    flops, nbytes = work(case.params, case.direction)
    return flops, nbytes * ELEMENT_BYTES[case.dtype] / 4


ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def _is_tensor(value: Any) -> bool:
    import torch

    return torch.is_tensor(value)


def _copy_into(inputs: dict, values: dict, grad_out: Any, grad_values: Any) -> None:
    for k, v in values.items():
        if _is_tensor(inputs.get(k)):
            inputs[k].copy_(v)
    if grad_out is not None and grad_values is not None:
        grad_out.copy_(grad_values)


def _compare(got: dict, reference: dict, tolerance: float) -> Check:
    from cudabench.measure.check import relative_error

    errors = tuple((n, relative_error(got[n], ref) if n in got else float("nan")) for n, ref in reference.items())
    return Check(errors=errors, tolerance=tolerance)


def _context_broken() -> bool:
    """Whether the CUDA context is unusable (an illegal address or device-side assert is sticky)."""
    import torch

    try:
        torch.cuda.synchronize()
        torch.ones(1, device="cuda").add_(1).item()
        return False
    except Exception:
        return True


def context_broken() -> bool:
    return _context_broken()


__all__ = ["Bench", "Settings", "Workload", "case_data", "case_inputs", "context_broken", "figure", "first_line",
           "true_fp32"]
