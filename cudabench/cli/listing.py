"""`cudabench list`: per family, its default shape and input kinds, then each kernel (variant) with its
summary and, under it, directions, precisions and constraints; then the family's baselines. Two
columns, the second wrapping: readable from 80 columns up, piped or not."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from cudabench.cli.common import KernelsDir, out, registry


def list_kernels(kernels_dir: Optional[List[Path]] = KernelsDir) -> None:
    """Kernels (variants), their family, directions, constraints, default shape and baselines."""
    from cudabench.spec.distributions import GENERIC_KINDS
    from cudabench.spec.shapes import format_shape

    reg = registry(kernels_dir)
    for family in reg.families:
        head = Text(family.name, style="bold")
        head.append(f"  default shape {format_shape(family.default_shape())}", style="")
        if len(family.input_kinds) > 1:
            head.append(f"; own input kinds: {', '.join(family.input_kinds)}")
        out.print(head)
        rows = _grid()
        for variant in family.variants:
            rules = [c.rule for c in (*family.constraints, *variant.constraints)]
            dirs = "fwd, bwd, fwdbwd" if family.grad_inputs and variant.has_backward else "fwd"
            facts = " · ".join([dirs, ", ".join(variant.dtypes), *rules])
            rows.add_row(variant.name, Text.assemble(variant.summary, "\n", (facts, "dim")))
        for b in family.baselines:
            kind = "baseline" + ("" if b.default else ", on request")
            rows.add_row(Text(b.name, style="cyan"),
                         Text.assemble(b.summary, "\n", (f"{kind} · {', '.join(b.dtypes)}", "dim")))
        out.print(Padding(rows, (0, 0, 1, 2)))
    out.print(Text.assemble("input kinds (--inputs): ", ("every family: uniform (default), " + ", ".join(GENERIC_KINDS)
                                                       + "; a family's own as listed", "")))
    out.print(Text("Kernels in plain, baselines (PyTorch's own, timed beside them) in cyan.", style="dim"))


def _grid() -> Table:
    grid = Table(show_header=False, box=None, padding=(0, 2, 0, 0), pad_edge=False)
    grid.add_column("name", no_wrap=True)
    grid.add_column("what", overflow="fold")
    return grid
