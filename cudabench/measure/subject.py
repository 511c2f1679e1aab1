"""What the judge, the subject process and the lessons share about one subject: its inputs in the
case's precision, the phases its time is split into, its work and figure for the ceilings, whether
a CUDA context survived; and `Bench`, one subject checked and called in this process for the
commands that teach or profile a call."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator, Optional

from cudabench import nvtx
from cudabench.errors import CheckFailedError
from cudabench.measure.check import check_workload, reference_results
from cudabench.measure.kinds import held_to
from cudabench.measure.workload import make_workload
from cudabench.results.records.model import Case, Check, Result
from cudabench.spec.build import build
from cudabench.spec.distributions import LARGE
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
    then sees the rounded values), and its upstream gradient comes in that precision too. The `large`
    kind is the first kind's draw scaled toward overflow (cudabench.measure.kinds)."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    large = case.inputs == LARGE
    made = family.inputs(case.params, gen, device, family.input_kinds[0] if large else case.inputs)
    grad_out = None
    if case.direction != "fwd":
        grad_out = torch.empty(output_shape(family, made), device=device).uniform_(-1, 1, generator=gen)
        grad_out = grad_out.to(getattr(torch, case.dtype))
    if large:
        from cudabench.measure.kinds import large_exponent, scaled

        exponent = large_exponent(family, case, made, grad_out, lambda x: in_dtype(x, case.dtype))
        made = scaled(made, exponent, family.large_inputs)
    return in_dtype(made, case.dtype), grad_out


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
# where integrity's time goes, recorded as "integrity/<part>" (the rest is plain "integrity")
INTEGRITY_PARTS = ("cupti", "judged calls", "serial calls", "references", "stream-order", "process state", "shapes")


class Phases:
    """Wall time per named phase of one subject. The GPU is synchronised at each boundary, so work
    queued in one phase (an fp64 reference) is not counted in the next (the check that waits for it).
    A phase opened inside another is its own: its time is taken out of the outer one, so the phases
    add up to the subject's time. Integrity's parts are named "integrity/<part>"."""

    def __init__(self, sync: Callable[[], None]) -> None:
        self.sync = sync
        self.seconds: dict[str, float] = {}
        self._inner: list[float] = []   # per open phase, the time of the phases opened inside it

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        self.sync()
        start = time.perf_counter()
        self._inner.append(0.0)
        try:
            yield
        finally:
            self.sync()
            spent = time.perf_counter() - start
            inner = self._inner.pop()
            self.add(name, spent - inner)
            if self._inner:
                self._inner[-1] += spent

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(0.0, seconds)


class Bench:
    """One subject checked and called in this process, for the commands that teach or profile one
    call (compare-sync-modes, profile): they are not judged measurements. `cudabench run` and `check`
    judge in another process (cudabench.measure.judge)."""

    def __init__(self, registry: Registry, device: str = "cuda") -> None:
        self.registry = registry
        self.device = device
        self.modules: dict[str, Any] = {}
        self._references: dict[tuple[str, int], dict] = {}  # (case key, seed) -> fp64 reference

    # ---- what a subject needs ----------------------------------------------------------------

    def module(self, family: Family, arch: Optional[str]) -> Any:
        if family.name in self.modules:  # a stand-in extension (tests)
            return self.modules[family.name]
        # built or not, asked each time: the sources' content decides which library runs, so an edit
        # between two subjects of a warm process is what the second one runs
        with nvtx.range(f"build {family.name}", "build"):
            return build(family, arch).module

    def make_op(self, family: Family, name: str, role: str, arch: Optional[str]) -> Callable[..., Any]:
        if role == "baseline":
            return family.baseline(name).make()
        return family.variant(name).bind(self.module(family, arch))

    def reference(self, family: Family, case: Case, seed: int, inputs: dict, grad_out: Any) -> dict:
        """The fp64 reference of this case on the inputs drawn from `seed`, computed once."""
        key = (case.key, seed)
        if key not in self._references:
            if any(k[0] != key[0] for k in self._references):
                self._references.clear()  # free the previous case's references first
            with nvtx.range("reference", "check"):
                self._references[key] = reference_results(family, inputs, case.direction, grad_out)
        return self._references[key]

    # ---- one checked call, for commands that time one thing -------------------------------------

    def checked_call(self, family: Family, case: Case, name: str, role: str, seed: int,
                     arch: Optional[str] = None) -> tuple[Callable[[], Any], Check]:
        """The call of one subject after it passed the correctness check (compare-sync-modes, profile)."""
        op = self.make_op(family, name, role, arch)
        try:
            inputs, grad_out = case_inputs(family, case, seed, self.device)
            reference = self.reference(family, case, seed, inputs, grad_out)
            workload = make_workload(op, inputs, case.direction, family.grad_inputs, grad_out)
            check = check_workload(workload, reference, held_to(family, case), case.dtype)
        except (RuntimeError, ValueError, TypeError) as exc:  # a binding's TORCH_CHECK, a CUDA error, OOM
            raise CheckFailedError(f"{name} failed at {case.shape_text} ({case.direction}): {first_line(exc)}") from None
        if not check.passed:
            raise CheckFailedError(f"{name} fails the correctness check at {case.shape_text} ({case.direction}): "
                                   f"error {check.worst:.3g} > tolerance {check.tolerance:g}; not timing it.",
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
        return work_of(subject.work, case, family, f"{subject.name}'s work")
    return result.flops, result.bytes


def work_of(work: Any, case: Case, family: Any, name: str = "work") -> tuple[float, float]:
    """(flops, bytes) of one call from a spec's count (the family's `work`, or a subject's own), which
    counts float32 elements (4 bytes): bytes scale with the case's element size."""
    from cudabench.spec.registry import spec_call

    if work is None:
        return 0.0, 0.0
    flops, nbytes = spec_call(family, name, work, case.params, case.direction)
    return flops, nbytes * ELEMENT_BYTES[case.dtype] / 4


ELEMENT_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


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


__all__ = ["Bench", "Phases", "case_data", "case_inputs", "context_broken", "figure", "first_line", "true_fp32"]
