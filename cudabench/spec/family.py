"""What a kernel family's spec.py declares: its sources, shape parameters, inputs, fp64 reference,
variants (bound to the built extension), baselines and constraints.

A family folder holds a pure-CUDA `.cu`, a torch binding `.cpp` and a `spec.py` that defines
`FAMILY = Family(...)`. Nothing here touches CUDA at import time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

Shape = Mapping[str, int]
Op = Callable[..., Any]  # op(**inputs) -> output tensor

DTYPES = ("float32", "bfloat16", "float16")
FLOAT32 = ("float32",)
# Unit roundoff of each dtype (half the gap between 1 and the next number): what one rounding costs.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8, "float16": 2.0**-11}


@dataclass(frozen=True)
class Param:
    """A shape parameter such as B, C, T or n, with its default."""

    name: str
    default: int
    help: str = ""
    minimum: int = 1   # the smallest value it takes (0 for a flag such as causal)


@dataclass(frozen=True)
class Constraint:
    """A rule a shape must satisfy before launch. `rule` is shown by `cudabench list`;
    `why` is the message when it is broken."""

    rule: str
    holds: Callable[[Shape], bool]
    why: str

    def violation(self, shape: Shape) -> Optional[str]:
        if self.holds(shape):
            return None
        values = ", ".join(f"{k}={v}" for k, v in shape.items())
        return f"{self.why} (rule {self.rule}; got {values})"


@dataclass(frozen=True)
class Variant:
    """One implementation in a family. `bind(ext)` turns the built extension module into
    an op callable as op(**inputs)."""

    name: str
    summary: str
    bind: Callable[[Any], Op]
    constraints: tuple[Constraint, ...] = ()
    has_backward: bool = True
    # (flops, bytes) the variant's own algorithm needs when fewer than the family's count (e.g. an
    # FFT formulation of a direct sum): the impossible-figure check and the "% ceiling" column use
    # this, while the TFLOP/s and GB/s columns keep the family's count so rates compare along the ladder
    work: Optional[Callable[[Shape, str], tuple[float, float]]] = None
    dtypes: tuple[str, ...] = FLOAT32          # the input and output precisions it takes
    # relative difference (‖a − b‖ / ‖a‖) two calls on the same inputs may show: sums with atomics
    # land in another order; 0 = bit-identical (the determinism check)
    nondeterminism: float = 0.0


@dataclass(frozen=True)
class Baseline:
    """A reference implementation timed beside the variants (e.g. PyTorch's own op).
    `make()` returns the op; it is called lazily, on the GPU, once per run."""

    name: str
    summary: str
    make: Callable[[], Op]
    default: bool = True
    has_backward: bool = True
    dtypes: tuple[str, ...] = FLOAT32
    work: Optional[Callable[[Shape, str], tuple[float, float]]] = None  # its own count, as Variant.work
    nondeterminism: float = 0.0                 # as Variant.nondeterminism


@dataclass(frozen=True)
class Family:
    name: str
    summary: str
    sources: tuple[str, ...]                 # file names in the family folder (.cu and .cpp)
    params: tuple[Param, ...]
    make_inputs: Callable[[Shape, Any, Any], dict[str, Any]]   # (shape, generator, device)
    reference: Op                            # the math, evaluated on float64 copies of the inputs
    variants: tuple[Variant, ...]
    baselines: tuple[Baseline, ...] = ()
    grad_inputs: tuple[str, ...] = ()        # inputs that receive gradients (enables bwd/fwdbwd)
    constraints: tuple[Constraint, ...] = ()  # apply to every variant
    work: Optional[Callable[[Shape, str], tuple[float, float]]] = None  # (flops, bytes) per call, in float32
    tolerance: float = 1e-5                   # relative error allowed in float32 (see tolerance_for)
    bound: str = ""                           # the ceiling that bounds it: "memory", "sgemm", "fma" or ""
    report_launches: bool = False             # count kernels per call (CUPTI) for every subject
    input_kinds: tuple[str, ...] = ("uniform",)  # make_inputs(shape, gen, device, kind=...) for the others
    large_inputs: tuple[str, ...] = ()        # the inputs the `large` kind scales (default: every float one)
    # the math as an honest kernel does it in bfloat16/float16 when it rounds intermediates to that
    # precision (attention's P and dS feed tensor cores): a call on another input kind is held to what
    # this errs on its draw (cudabench.measure.kinds.rounding_allowance)
    rounded_reference: Optional[Op] = None
    # the most terms one output's sum adds at a shape and direction (timex's forward: T, matmul: K): a draw
    # of equal terms (the constant kind) is held to that many float32 roundoffs at least (kinds.held_to)
    reduction: Optional[Callable[[Shape, str], int]] = None
    extra_cuda_cflags: tuple[str, ...] = ()
    feature_archs: tuple[str, ...] = ()       # arch-specific targets, e.g. sm_90a: a build for sm_90 is made for it
    dtypes: tuple[str, ...] = FLOAT32         # precisions its inputs come in (make_inputs' float32, cast)
    folder: Path = field(default=Path("."), compare=False)

    def tolerance_for(self, dtype: str) -> float:
        """The relative error (‖out − ref‖ / ‖ref‖ against the fp64 reference) allowed in `dtype`:
        the float32 tolerance, plus 4 units of the dtype's roundoff. Why: the inputs are rounded to
        the dtype before the fp64 reference sees them, so their rounding costs nothing; each output
        is rounded once when it is stored (at most one unit, and about u/√3 norm-wise); the sums are
        meant to accumulate in float32, whose error over the family's reduction length the float32
        tolerance already bounds; the rest leaves room for one rounded intermediate (a gradient
        through a stored activation). A kernel that accumulates in the low precision errs by about
        u·√K over a reduction of length K, and fails for any real K."""
        return self.tolerance + 4 * UNIT_ROUNDOFF[dtype] if dtype != "float32" else self.tolerance

    @property
    def directions(self) -> tuple[str, ...]:
        return ("fwd", "bwd", "fwdbwd") if self.grad_inputs else ("fwd",)

    @property
    def all_input_kinds(self) -> tuple[str, ...]:
        """Its own kinds, then the generic ones every family has (cudabench.spec.distributions)."""
        from cudabench.spec.distributions import GENERIC_KINDS

        return self.input_kinds + tuple(k for k in GENERIC_KINDS if k not in self.input_kinds)

    def inputs(self, shape: Shape, gen: Any, device: Any, kind: str = "uniform") -> dict[str, Any]:
        """Fresh random inputs of the given kind (the first kind is the default)."""
        if kind == self.input_kinds[0]:
            return self.make_inputs(shape, gen, device)
        if kind in self.input_kinds:
            return self.make_inputs(shape, gen, device, kind=kind)
        from cudabench.spec.distributions import reshape

        return reshape(self.make_inputs(shape, gen, device), kind, gen)

    def default_shape(self) -> dict[str, int]:
        return {p.name: p.default for p in self.params}

    def source_paths(self) -> list[Path]:
        return [self.folder / s for s in self.sources]

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    def baseline(self, name: str) -> Baseline:
        for b in self.baselines:
            if b.name == name:
                return b
        raise KeyError(name)


def compiled(fn: Op) -> Op:
    """torch.compile(fn) for one case. The compile cache is reset first: it is kept per function
    across calls, and past its recompile limit (8 shapes) torch silently falls back to eager."""
    import torch

    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)


# ---- outputs: how bindings allocate --------------------------------------------------------
# Plain allocations. There is deliberately no flag here that says whether a call is checked: the
# subject's process holds no such state (cudabench.measure.poison fills the memory instead).


def empty_like(t: Any) -> Any:
    """Allocate an output like `t`."""
    import torch

    return torch.empty_like(t)


def empty(size: Any, like: Any) -> Any:
    """Allocate an output of `size` with the dtype and device of `like`."""
    import torch

    return torch.empty(size, dtype=like.dtype, device=like.device)
