"""`cudabench doctor`: what this machine offers for building, timing and profiling kernels."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from cudabench.cli.common import out, say
from cudabench.device import environment, nvml_driver_version, read_clocks
from cudabench.profile.tools import find_tool, tool_version


@dataclass(frozen=True)
class Finding:
    item: str
    ok: bool
    detail: str


def gpu_findings() -> list[Finding]:
    import torch

    if torch.version.cuda is None:
        return [Finding("GPU", False, f"torch {torch.__version__} is a CPU build: kernels cannot run here")]
    if not torch.cuda.is_available():
        return [Finding("GPU", False, "no CUDA device visible (see nvidia-smi, CUDA_VISIBLE_DEVICES)")]
    env = environment()
    found = [Finding("GPU", True, f"{env.gpu}, compute capability {env.capability}, {env.sm_count} SMs, "
                                  f"{env.memory_bytes / 2**30:.0f} GiB, L2 {env.l2_bytes / 2**20:.0f} MiB")]
    found.append(Finding("driver", bool(env.driver), env.driver or "unknown (NVML not readable)"))
    clocks = read_clocks()
    if clocks:
        found.append(Finding("clocks", True, f"SM {clocks.sm_mhz:.0f}/{clocks.sm_max_mhz:.0f} MHz, "
                                             f"memory {clocks.mem_mhz:.0f} MHz, {clocks.temperature_c:.0f} °C, "
                                             f"{clocks.power_w:.0f} W (read-only; never changed)"))
    return found


def software_findings() -> list[Finding]:
    import torch

    found = [Finding("torch", True, f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})")]
    for name, why in [("nvcc", "build and build --check"), ("ninja", "JIT builds"),
                      ("nsys", "profile --tool nsys"), ("ncu", "profile --tool ncu"),
                      ("compute-sanitizer", "memcheck / racecheck")]:
        path = find_tool(name)
        if path:
            found.append(Finding(name, True, f"{path}  {tool_version(path)}"))
        else:
            found.append(Finding(name, False, f"not found on PATH or in /usr/local/cuda/bin (needed for {why})"))
    if not nvml_driver_version():
        found.append(Finding("NVML", False, "nvidia-ml-py cannot read the driver: no clock readings"))
    return found


def host_compiler_finding() -> Finding:
    """The C++ compiler torch's JIT uses ($CXX, else c++), and whether the extensions it links use
    the shared libstdc++ of this process. A static copy breaks iostream number formatting inside
    the extension (a TORCH_CHECK message that streams an int then crashes)."""
    import os
    import tempfile

    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        return Finding("C++ compiler", False, "none found ($CXX, c++, g++): JIT builds need one")
    source = "#include <sstream>\nint cudabench_probe(long v) { std::ostringstream s; s << v; return (int)s.str().size(); }\n"
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = Path(tmp) / "probe.cpp", Path(tmp) / "probe.so"
        src.write_text(source)
        try:
            built = subprocess.run([cxx, "-shared", "-fPIC", str(src), "-o", str(lib)], capture_output=True,
                                   text=True)
            if built.returncode != 0:
                return Finding("C++ compiler", False, f"{cxx} cannot build a shared library: {built.stderr.strip()[:200]}")
            ldd = subprocess.run(["ldd", str(lib)], capture_output=True, text=True).stdout
        except OSError as exc:
            return Finding("C++ compiler", False, f"could not run {cxx} or ldd: {exc}")
    version = tool_version(cxx, line=0)
    if "libstdc++" not in ldd:
        return Finding("C++ compiler", False, f"{cxx} ({version}) links libstdc++ statically into extensions: "
                       "streaming numbers into an iostream (e.g. in TORCH_CHECK messages) inside them can "
                       "crash; cudabench's bindings format with std::to_string. Set CXX=g++ to use the system one.")
    return Finding("C++ compiler", True, f"{cxx} ({version})")


def findings() -> list[Finding]:
    return gpu_findings() + software_findings() + [host_compiler_finding()]


def doctor_cmd(
    ceilings: bool = typer.Option(False, "--ceilings", help="(Re)measure this GPU's copy bandwidth and SGEMM "
                                  "throughput, the ceilings runs compare against (cached)."),
) -> None:
    """GPU, driver, clocks, torch, nvcc, ninja, nsys, ncu: what works here and what is missing."""
    if ceilings:
        from cudabench.measure import ceilings as device_ceilings
        from cudabench.device import require_gpu

        require_gpu()
        measured = device_ceilings.get(remeasure=True)
        if measured:
            out.print(measured.describe())
        else:
            say(("could not measure the ceilings", "yellow"), " (out of memory?)")

    table = Table(header_style="bold", show_header=False)
    table.add_column("item")
    table.add_column("ok")
    table.add_column("detail")
    for f in findings():
        table.add_row(f.item, Text("ok", "green") if f.ok else Text("missing", "yellow"), f.detail)
    out.print(table)
