"""Finding the command-line tools cudabench drives (nvcc, ncu, compilers) and asking their version.
Shared by the profile launchers and `cudabench doctor`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

CUDA_BIN_DIRS = ("/usr/local/cuda/bin",)


def find_tool(name: str) -> Optional[str]:
    found = shutil.which(name)
    if found:
        return found
    for d in CUDA_BIN_DIRS:
        p = Path(d) / name
        if p.is_file():
            return str(p)
    return None


def tool_version(path: str, line: int = -1) -> str:
    """One line of what a tool prints for --version: the last (nvcc, ncu) or the first (compilers)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(could not run: {exc})"
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return lines[line] if lines else ""
