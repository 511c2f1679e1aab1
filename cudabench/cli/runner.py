"""What run and check share: the GPUs --gpus names, --fuzz's extra shapes, and when a run failed (the
runner itself: cudabench.engine.start)."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional


def gpus_of(spec: Optional[str]) -> list:
    """The GPUs --gpus names (nothing: the default GPU alone)."""
    if not spec:
        return []
    from cudabench.engine.gpus import detect, select

    return select(spec, detect())


def fuzz_tasks(reg: Any, tasks: list, count: int, options: Any, seed: Optional[int]) -> list:
    """`check --fuzz N`: each planned variant again at N random shapes within its constraints."""
    import random

    from cudabench.engine.plan import plan
    from cudabench.spec.fuzz import random_shapes

    if count <= 0:
        return []
    rng = random.Random(seed)
    variants = {(task.family.name, v.name): (task.family, v) for task in tasks for v in task.variants}
    extra = []
    for family, variant in variants.values():  # once each, however many shapes were planned
        for shape in random_shapes(family, variant, count, rng):
            extra += plan(reg, [variant.name], shape, replace(options, baselines=()))
    return extra


def failed(results: list) -> bool:
    return any(r.status != "ok" and not r.skipped.startswith(("constraint", "dtype")) for r in results)


def op_kernels(op: str, inputs: Optional[str], reference: Optional[str], grad: Any, shape: Any, baselines: Any,
               dtypes: Any) -> tuple[list[str], Any, None]:
    """--op: the op as a kernel family of its own (cudabench.spec.op_family, the same as
    cudabench.bench): its name, the kernels folder that holds it, and no baseline names (the
    --baseline import paths become the family's own baselines)."""
    from cudabench.cli.common import split
    from cudabench.errors import ShapeError
    from cudabench.spec.op_family import op_spec, write_family
    from cudabench.spec.shapes import parse_shapes

    if not inputs or not reference:
        raise ShapeError("--op needs --op-inputs and --op-reference: how to make its inputs, and the math it is "
                         "checked against.", "e.g. --op mypkg.ops:fused_add --op-inputs mypkg.bench:make_inputs "
                         "--op-reference mypkg.bench:reference --shape n=1048576")
    if not shape:
        raise ShapeError("--op needs --shape: an op named by import path has no default shape.",
                         "e.g. --shape n=1048576")
    spec = op_spec(op, inputs, reference, parse_shapes(shape), split(baselines) or (),
                   split(dtypes) or ("float32",), split(grad) or ())
    return [spec.name], write_family(spec), None
