"""`cudabench list`: kernels, variants, baselines, constraints, precisions, input kinds."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

from rich.table import Table

from cudabench.cli.common import KernelsDir, out, registry


def list_kernels(kernels_dir: Optional[List[Path]] = KernelsDir) -> None:
    """Kernels (variants), their family, directions, constraints, default shape and baselines."""
    from cudabench.spec.shapes import format_shape

    reg = registry(kernels_dir)
    table = Table(header_style="bold")
    for col in ("kernel", "family", "directions", "dtypes", "constraints", "default shape", "summary"):
        table.add_column(col, no_wrap=col in ("kernel", "default shape", "constraints"))
    for family, variant in reg.variants():
        rules = [c.rule for c in (*family.constraints, *variant.constraints)]
        dirs = "fwd, bwd, fwdbwd" if family.grad_inputs and variant.has_backward else "fwd"
        table.add_row(variant.name, family.name, dirs, ", ".join(variant.dtypes), "\n".join(rules) or "-",
                      format_shape(family.default_shape()), variant.summary)
    out.print(table)
    bl = Table(header_style="bold", title="baselines (timed beside the variants)", title_justify="left")
    for col in ("baseline", "family", "default", "dtypes", "what"):
        bl.add_column(col)
    kinds = [f"{f.name}: {', '.join(f.input_kinds)}" for f in reg.families if len(f.input_kinds) > 1]
    for family in reg.families:
        for b in family.baselines:
            bl.add_row(b.name, family.name, "yes" if b.default else "no", ", ".join(b.dtypes), b.summary)
    out.print(bl)
    from cudabench.spec.distributions import GENERIC_KINDS

    out.print("input kinds (--inputs): every family: uniform (default), " + ", ".join(GENERIC_KINDS)
              + ("; " + "; ".join(kinds) if kinds else ""))
