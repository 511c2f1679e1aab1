"""`cudabench build`: JIT builds (cached), or compile-only checks with nvcc that need no GPU."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from cudabench.cli.common import KernelsDir, err, registry, say, split
from cudabench.errors import ShapeError


def build_cmd(
    kernel: Optional[List[str]] = typer.Option(None, "--kernel", "-k", help="Kernel or family (repeatable or "
                                               "comma-separated)."),
    all_: bool = typer.Option(False, "--all", help="Every kernel family."),
    check: bool = typer.Option(False, "--check", help="Compile-only with nvcc (and a syntax check of the "
                               "torch binding): no GPU and no CUDA torch needed."),
    arch: Optional[str] = typer.Option(None, "--arch", help="Target, e.g. sm_90 (default: this GPU)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the compiler's full output."),
    kernels_dir: Optional[List[Path]] = KernelsDir,
) -> None:
    """JIT-build kernel families (cached by a hash of sources, flags, arch and torch version)."""
    from cudabench.spec.build import build, normalize_arch
    from cudabench.spec.compile_check import check_compile

    arch = normalize_arch(arch) if arch else None  # a typo is a usage error (exit 2), before any work
    reg = registry(kernels_dir)
    kernel = list(split(kernel) or ())
    if not all_ and not kernel:
        raise ShapeError("Name what to build: --kernel NAME (repeatable) or --all.")
    if all_ and kernel:
        raise ShapeError(f"Name --kernel or --all, not both (got --all and --kernel {', '.join(kernel)}).")
    families = list(reg.families) if all_ else list(dict.fromkeys(f for f, _ in reg.resolve(kernel)))
    if check:
        if not arch:
            raise ShapeError("build --check needs a target architecture.", "Add --arch sm_90 (for example).")
        failed = 0
        for family in families:
            for c in check_compile(family, arch):
                status = ("ok", "green") if c.ok else ("FAILED", "bold red")
                say(status, f" {family.name}: {c.source.name} ({c.seconds:.1f} s)")
                if not c.ok:
                    failed += 1
                    from cudabench.spec.build import compiler_errors

                    err.print(compiler_errors(c.output) if not verbose else c.output)
        if failed:
            raise typer.Exit(1)
        return
    from cudabench.device import require_gpu

    if arch is None:
        require_gpu()
    for family in families:
        b = build(family, arch, verbose)
        state = "cache hit" if b.cache_hit else "compiled"
        say(("ok", "green"), f" {family.name} for {b.arch}: {b.seconds:.1f} s ({state}) → {b.directory}")
