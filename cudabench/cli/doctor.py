"""`cudabench doctor`: what this machine offers for building, timing and profiling kernels."""

# Imports inside the commands are deliberate: every command module is loaded at start-up (for
# `cudabench --help` too), so each command imports what it uses when it runs.

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.table import Table
from rich.text import Text

from cudabench.cli.common import out, say
from cudabench.device import environment, nvml_driver_version, read_clocks
from cudabench.errors import ToolNotFoundError
from cudabench.tools import Found, tool_version


@dataclass(frozen=True)
class Finding:
    item: str
    ok: bool
    detail: str
    label: str = ""  # the status word when not ok and not simply "missing"
    where: Optional[Found] = None  # for tools: the binary and where it came from

    def status(self) -> Text:
        return Text("ok", "green") if self.ok else Text(self.label or "missing", "yellow")


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

    from cudabench import tools
    from cudabench.profile import ncu, nsys

    found = [Finding("torch", True, f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})")]
    nvcc = tool_finding("nvcc", "build and build --check", tools.find_nvcc)
    found += [nvcc, cuda_home_finding(nvcc.where)] if nvcc.ok else [nvcc]
    found.append(tool_finding("ninja", "JIT builds", lambda: tools.locate("ninja"), fix="pip install ninja"))
    nsys_found = nsys_finding(tool_finding("nsys", "profile --tool nsys", nsys.find_nsys))
    found += [nsys_found, tool_finding("ncu", "profile --tool ncu", ncu.find_ncu),
              tool_finding("compute-sanitizer", "memcheck / racecheck",
                           lambda: tools.locate("compute-sanitizer", SANITIZER_GLOBS))]
    found += [nvtx_finding(nsys_found), matplotlib_finding()]
    if not nvml_driver_version():
        found.append(Finding("NVML", False, "nvidia-ml-py cannot read the driver: no clock readings"))
    return found


SANITIZER_GLOBS = ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer")


def tool_finding(name: str, needed_for: str, find: Callable[[], Found], fix: str = "") -> Finding:
    """Where the tool was found, by the same search the commands use, and its version."""
    try:
        where = find()
    except ToolNotFoundError as exc:
        return Finding(name, False, f"{exc.message} Needed for {needed_for}." + (f" Fix: {fix}" if fix else ""))
    from cudabench.tools import SIGNATURES, not_the_tool

    wrong = not_the_tool(where.path, name) if name in SIGNATURES else ""
    if wrong:
        return Finding(name, False, f"{wrong} (found via {where.how}). Needed for {needed_for}.", label="not it")
    return Finding(name, True, f"{where.describe()}  {tool_version(where.path)}", where=where)


def nsys_finding(found: Finding) -> Finding:
    """An nsys without its importer (the copy inside Nsight Compute) records but writes no report."""
    from cudabench.profile.nsys import importer_present

    if not found.ok or importer_present(found.where.path):
        return found
    return replace(found, ok=False, label="limited", detail=f"{found.detail}; no QdstrmImporter beside it: it "
                   "writes only a .qdstrm, no report (install Nsight Systems, or --tool torch / ncu)")


def cuda_home_finding(nvcc: Found) -> Finding:
    """The toolkit nvcc compiles with against the CUDA_HOME torch's JIT would use on its own."""
    from cudabench import tools

    ours, theirs = tools.cuda_home_of(nvcc.path), tools.torch_cuda_home()
    if tools.same_folder(ours, theirs):
        return Finding("CUDA_HOME", True, f"{ours} (the toolkit of {nvcc.path}; torch uses the same)")
    if tools.user_cuda_home():
        return Finding("CUDA_HOME", False, f"torch builds with $CUDA_HOME={theirs}, but {nvcc.path} (build --check) "
                       f"belongs to {ours}: unset one or make them agree", label="differs")
    return Finding("CUDA_HOME", False, f"torch alone would use {theirs or 'none'}, but {nvcc.path} runs the "
                   f"toolkit in {ours}, which cudabench build uses (set CUDA_HOME={ours} for other torch builds)",
                   label="differs")


def nvtx_finding(nsys_found: Finding) -> Finding:
    from cudabench.profile.nsys import nvtx_backend_for, parse_nsys_version

    version = package_version("nvtx")
    if version is None:
        return Finding("nvtx", False, "not installed: NVTX ranges go through torch.cuda.nvtx (pip install nvtx)")
    if nsys_found.where:
        nsys_version = parse_nsys_version(nsys_found.detail)
        backend, why = nvtx_backend_for(nsys_version, version)
        if backend != "nvtx":
            return Finding("nvtx", True, f"{version}; profile --tool nsys marks ranges with torch.cuda.nvtx: {why}")
    return Finding("nvtx", True, version)


def matplotlib_finding() -> Finding:
    version = package_version("matplotlib")
    if version is None:
        return Finding("matplotlib", False, 'not installed (needed for cudabench plot): pip install "cudabench[plot]"')
    return Finding("matplotlib", True, version)


def package_version(name: str) -> Optional[str]:
    """The installed version, without importing the package (matplotlib takes a while)."""
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


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
    """GPU, driver, clocks, torch, nvcc and CUDA_HOME, ninja, nsys, ncu, nvtx, matplotlib: what works
    here, where each tool was found, and what is missing."""
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
        table.add_row(f.item, f.status(), f.detail)
    out.print(table)
