"""Nsight Systems: finding a working nsys, the child command line (a pure function), running it
and exporting the report to SQLite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Mapping, Optional, Sequence

from cudabench.errors import CudabenchError
from cudabench.tools import Found, locate

# Where nsys usually lives after PATH, newest first within each pattern. The copy bundled inside
# Nsight Compute comes last: it records but cannot import its .qdstrm into a report.
INSTALL_GLOBS = (
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/nsight-systems-*/bin/nsys",
    "/usr/lib/nsight-systems/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)


class NsysImporterMissing(CudabenchError):
    """nsys recorded a .qdstrm but could not turn it into a .nsys-rep (exit 2, like a missing tool)."""


def find_nsys(explicit: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Found:
    """--nsys PATH, then $CUDABENCH_NSYS, then PATH, then the usual install folders."""
    return locate("nsys", INSTALL_GLOBS, explicit, "--nsys", "CUDABENCH_NSYS", env, title="Nsight Systems (nsys)",
                  hint="Install Nsight Systems (e.g. the nsight-systems package or the CUDA toolkit's), or pass "
                  "--nsys PATH. Without it: `cudabench profile --tool torch` (torch.profiler) or `--tool ncu`.")


def nsys_version(nsys: str) -> Optional[tuple[int, ...]]:
    """(2023, 4, 4) from 'NVIDIA Nsight Systems version 2023.4.4.54-...'; None if unreadable."""
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_nsys_version(out.stdout + out.stderr)


def parse_nsys_version(text: str) -> Optional[tuple[int, ...]]:
    m = re.search(r"(\d{4})\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def importer_present(nsys: str) -> bool:
    """nsys converts its raw .qdstrm with QdstrmImporter from a sibling host-linux-x64 folder."""
    base = Path(nsys).resolve().parent
    return any((d / "QdstrmImporter").is_file() for d in (base, base.parent / "host-linux-x64"))


def nsys_command(nsys: str, output: Path, child: Sequence[str]) -> list[str]:
    """Trace CUDA and NVTX only (no CPU sampling, no context switches: small reports), and only
    between the worker's cudaProfilerStart and cudaProfilerStop (the timed region)."""
    return [
        nsys, "profile",
        "--trace=cuda,nvtx",
        "--sample=none",
        "--cpuctxsw=none",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--force-overwrite=true",
        f"--output={output}",
        *child,
    ]


def export_command(nsys: str, report: Path, sqlite: Path) -> list[str]:
    return [nsys, "export", "--type=sqlite", "--force-overwrite=true", f"--output={sqlite}", str(report)]


def nvtx_backend_for(version: Optional[tuple[int, ...]], nvtx_package: Optional[str]) -> tuple[str, str]:
    """(backend, why): ranges from the nvtx package >= 0.2.13 are not recorded by Nsight Systems
    before 2024; torch.cuda.nvtx ranges are. Pick what this nsys can read."""
    if nvtx_package is None:
        return "torch", "the nvtx package is not installed"
    if version is not None and version < (2024,):
        parts = tuple(int(p) for p in re.findall(r"\d+", nvtx_package)[:3])
        if parts >= (0, 2, 13):
            return "torch", (f"this nsys ({'.'.join(map(str, version))}) predates 2024 and does not record "
                             f"ranges of nvtx {nvtx_package}")
    return "nvtx", ""


def with_ext(base: Path, ext: str) -> Path:
    """base + ext, keeping any dots already in the name (Path.with_suffix would replace them)."""
    return base.parent / (base.name + ext)


def report_paths(output: Path) -> tuple[Path, Path, Path]:
    """(.nsys-rep, .qdstrm, .sqlite) for an --output base path."""
    return with_ext(output, ".nsys-rep"), with_ext(output, ".qdstrm"), with_ext(output, ".sqlite")


def check_report(output: Path, nsys: str, log: str) -> Path:
    """The .nsys-rep, or a plain explanation when nsys only left a .qdstrm (no importer)."""
    rep, qdstrm, _ = report_paths(output)
    if rep.is_file():
        return rep
    if qdstrm.is_file():
        raise NsysImporterMissing(
            f"{nsys} recorded the run but could not turn it into a report: it wrote only {qdstrm} "
            f"({qdstrm.stat().st_size / 2**20:.1f} MiB). This nsys has no working QdstrmImporter "
            "(for example the copy bundled inside Nsight Compute), so it cannot write .nsys-rep files."
            + (f" nsys said: {importer_message(log)}" if importer_message(log) else ""),
            "Use a full Nsight Systems install (--nsys PATH or $CUDABENCH_NSYS), or profile with "
            "`--tool torch` (torch.profiler, Chrome trace) or `--tool ncu` (Nsight Compute). The .qdstrm is kept.")
    raise CudabenchError(f"nsys wrote no report at {rep}. Its output ended with: {last_line(log)}",
                         "Run the printed command by hand to see nsys's full output.")


def importer_message(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if "importer" in ln.lower()]
    return " ".join(lines[-2:])


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(nothing)"
