"""What a kernel author writes against: Family, Variant, Baseline, Param, Constraint, the precisions
(DTYPES) and the output allocators (`from cudabench.spec import Family, ...` in a family's spec.py),
plus the registry, shapes and the JIT build beside them."""

from cudabench.spec.family import (DTYPES, Baseline, Constraint, Family, Op, Param, Shape, Variant, compiled, empty,
                                   empty_like)

__all__ = ["DTYPES", "Baseline", "Constraint", "Family", "Op", "Param", "Shape", "Variant", "compiled", "empty",
           "empty_like"]
