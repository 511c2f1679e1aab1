"""`cudabench build --check`: each .cu compiled by nvcc alone (an object file, thrown away) and each
.cpp binding syntax-checked against torch's headers, with no GPU and no torch link: what CI machines
without a GPU can still check."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from cudabench import tools
from cudabench.errors import BuildError
from cudabench.spec.build import (BINDING_STD, CUDA_FLAGS, INCLUDE_DIR, TORCH_NVCC_DEFINES, gencode, normalize_arch,
                                   with_features)
from cudabench.spec.family import Family


@dataclass(frozen=True)
class CompileCheck:
    source: Path
    command: tuple[str, ...]
    seconds: float
    ok: bool
    output: str


# ---- architecture and cache key ---------------------------------------------------------------


def find_nvcc() -> str:
    """The nvcc to compile with; one that answers --version as something else is an error, not a
    string of FAILED checks."""
    return tools.verified(tools.find_nvcc(), "nvcc", "Point $CUDABENCH_NVCC (or PATH) at the CUDA toolkit's nvcc.").path


def cuda_home_candidates(nvcc: Optional[str] = None) -> list[str]:
    """Where the CUDA headers may be: what the user set, the toolkit of the nvcc in use, the default."""
    derived = tools.cuda_home_of(nvcc) if nvcc else None
    return [p for p in (tools.user_cuda_home(), derived, "/usr/local/cuda") if p]


def cuda_include_dir(nvcc: Optional[str] = None) -> Optional[Path]:
    for home in cuda_home_candidates(nvcc):
        inc = Path(home) / "include"
        if (inc / "cuda_runtime.h").is_file():
            return inc
    return None


def nvcc_command(nvcc: str, source: Path, arch: str, output: Path) -> list[str]:
    return [nvcc, "-c", *CUDA_FLAGS, *TORCH_NVCC_DEFINES, gencode(arch), f"-I{INCLUDE_DIR}", f"-I{source.parent}", str(source), "-o",
            str(output)]


def binding_command(cxx: str, source: Path, scratch: Path, nvcc: Optional[str] = None) -> Optional[list[str]]:
    """Host-compiler syntax check of a .cpp binding against torch's headers, or None if impossible."""
    import torch
    from torch.utils import cpp_extension

    cuda_inc = cuda_include_dir(nvcc)
    if cuda_inc is None:
        return None
    torch_includes = cpp_extension.include_paths("cpu")
    includes = [*torch_includes, str(cuda_inc), sysconfig.get_paths()["include"], str(INCLUDE_DIR),
                str(source.parent)]
    # A CPU build of torch ships the c10/cuda headers but not this one, generated at CUDA build time.
    macros = Path("c10/cuda/impl/cuda_cmake_macros.h")
    if not any((Path(d) / macros).is_file() for d in torch_includes):
        (scratch / macros).parent.mkdir(parents=True, exist_ok=True)
        (scratch / macros).write_text("#pragma once\n")
        includes.append(str(scratch))
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    return [cxx, "-fsyntax-only", BINDING_STD, f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            "-DTORCH_EXTENSION_NAME=cudabench_check", *(f"-I{i}" for i in includes), str(source)]


def _regular_sources(family: Family) -> None:
    """Each source a regular file: a compiler reading a FIFO waits for ever."""
    from cudabench.files import kind_of

    for source in family.source_paths():
        try:
            mode = source.stat().st_mode
        except OSError as exc:
            raise BuildError(f"{family.name}: its source {source} cannot be read: {exc.strerror}.",
                             "Fix the sources the family's spec.py lists.") from None
        if not stat.S_ISREG(mode):
            raise BuildError(f"{family.name}: its source {source} is {kind_of(mode)}, not a regular file.",
                             "Fix the sources the family's spec.py lists.")


COMPILE_TIMEOUT = 600  # seconds one compile check may take


def _run(command: list[str], source: Path) -> CompileCheck:
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return CompileCheck(source, tuple(command), time.perf_counter() - start, False,
                            f"{command[0]} did not finish within {COMPILE_TIMEOUT} s")
    said = proc.stdout + proc.stderr
    if proc.returncode != 0 and not said.strip():  # a failure is never shown without a reason
        said = f"{command[0]} exited with code {proc.returncode} and printed nothing"
    return CompileCheck(source, tuple(command), time.perf_counter() - start, proc.returncode == 0, said)


def check_compile(family: Family, arch: str, bindings: bool = True) -> list[CompileCheck]:
    """Compile each .cu with nvcc only (object file, thrown away); syntax-check each .cpp binding. A
    family's arch-specific target replaces `arch` as in a real build (sm_90 -> sm_90a)."""
    arch = with_features(family, normalize_arch(arch))
    _regular_sources(family)
    nvcc = find_nvcc()
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    with tempfile.TemporaryDirectory(prefix="cudabench-check-") as tmp:
        jobs = []
        for source in family.source_paths():
            if source.suffix == ".cu":
                jobs.append((nvcc_command(nvcc, source, arch, Path(tmp) / f"{source.stem}.o"), source))
            elif source.suffix == ".cpp" and bindings and cxx:
                command = binding_command(cxx, source, Path(tmp), nvcc)
                if command:
                    jobs.append((command, source))
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            return list(pool.map(lambda job: _run(*job), jobs))
