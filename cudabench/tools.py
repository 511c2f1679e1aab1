"""Finding the command-line tools cudabench drives (nvcc, nsys, ncu, ninja, compilers), saying where
each came from, and asking their version. `build`, `profile` and `doctor` all go through `locate`,
so doctor reports the very binary the other commands would run."""

from __future__ import annotations

import functools
import glob
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

from cudabench.errors import ToolNotFoundError

# An install location: a file glob (reported as its folder) or (glob, how to report it).
Where = Union[str, tuple[str, str]]


@dataclass(frozen=True)
class Found:
    path: str
    how: str  # where it came from: "--nsys", "$CUDABENCH_NSYS", "PATH" or an install folder

    def describe(self) -> str:
        return f"{self.path} (found via {self.how})"


def locate(name: str, globs: Sequence[Where] = (), explicit: Optional[str] = None, option: str = "",
           env_var: str = "", env: Optional[Mapping[str, str]] = None, title: str = "",
           hint: str = "") -> Found:
    """The tool `name`: an explicit path (option, then $env_var), then PATH, then the install
    globs in order (newest version first within a glob). An explicit path that does not work is
    an error rather than a fallback: the user asked for that binary."""
    env = os.environ if env is None else env
    for value, how in ((explicit, option), (env.get(env_var) if env_var else None, f"${env_var}")):
        if value:
            return Found(_explicit(value, how, env, name), how)
    on_path = shutil.which(name, path=env.get("PATH", os.defpath))
    if on_path:
        return Found(os.path.abspath(on_path), "PATH")
    for pattern, how in map(_where, globs):
        for candidate in sorted(glob.glob(pattern), key=_natural, reverse=True):
            if _executable(candidate):
                return Found(candidate, how)
    looked = [s for s in (option, env_var and f"${env_var}") if s] + ["PATH"] + [how for _, how in map(_where, globs)]
    raise ToolNotFoundError(f"{title or name} was not found. Looked at {', '.join(looked)}.", hint)


def _explicit(value: str, how: str, env: Mapping[str, str], name: str) -> str:
    # A bare name ("nsys") is looked up on PATH like a shell would; anything else is a path.
    path = shutil.which(value, path=env.get("PATH", os.defpath)) if os.sep not in value else value
    if path and _executable(path):
        return os.path.abspath(path)
    raise ToolNotFoundError(f"{how} names {value}, which is not an executable file.",
                            f"Point {how} at the {name} binary itself, or unset it to search PATH "
                            "and the usual install folders.")


def _where(item: Where) -> tuple[str, str]:
    return item if isinstance(item, tuple) else (item, os.path.dirname(item))


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _natural(path: str) -> list:
    """Sort key under which 2025.10 comes after 2025.9 (plain string order says otherwise)."""
    return [(int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"(\d+)", path)]


# ---- nvcc and the CUDA toolkit it belongs to ----------------------------------------------------

def find_nvcc(env: Optional[Mapping[str, str]] = None) -> Found:
    """$CUDABENCH_NVCC, PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin."""
    env = os.environ if env is None else env
    homes = [(os.path.join(env[v], "bin", "nvcc"), f"${v}/bin") for v in ("CUDA_HOME", "CUDA_PATH") if env.get(v)]
    return locate("nvcc", [*homes, "/usr/local/cuda/bin/nvcc"], env_var="CUDABENCH_NVCC", env=env,
                  hint="Install the CUDA toolkit and put its bin/ folder on PATH (or set $CUDABENCH_NVCC).")


_TOP = re.compile(r"^#\$ TOP=(.+?)\s*$", re.MULTILINE)


@functools.lru_cache(maxsize=None)
def cuda_home_of(nvcc: str) -> str:
    """The toolkit folder `nvcc` really compiles with (headers in its include/). nvcc itself says:
    with --dryrun -v it prints its settings, among them TOP (its nvcc.profile's toolkit root),
    without running anything. Asking it works through wrapper scripts and ccache-style links,
    where the folder above the path (torch's guess) is wrong. Falls back to that folder, symlinks
    resolved, when nvcc prints no TOP."""
    try:
        said = subprocess.run([nvcc, "--dryrun", "-v", "-E", "-x", "cu", os.devnull], capture_output=True,
                              text=True, timeout=60)
        m = _TOP.search(said.stderr + said.stdout)
    except (OSError, subprocess.TimeoutExpired):
        m = None
    return os.path.realpath(m.group(1) if m else Path(nvcc).resolve().parent.parent)


def user_cuda_home(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """CUDA_HOME (or CUDA_PATH) as the user set it: torch.utils.cpp_extension takes it as is."""
    env = os.environ if env is None else env
    return env.get("CUDA_HOME") or env.get("CUDA_PATH") or None


def torch_cuda_home() -> Optional[str]:
    """The CUDA_HOME torch.utils.cpp_extension builds with on its own: its module global (read at
    import) on a CUDA build of torch; on a CPU build, which leaves it None, what its guess gives."""
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME or not hasattr(cpp_extension, "_find_cuda_home"):
        return cpp_extension.CUDA_HOME
    log = logging.getLogger(cpp_extension.__name__)
    level = log.level
    log.setLevel(logging.ERROR)  # its "No CUDA runtime is found" warning says nothing new here
    try:
        return cpp_extension._find_cuda_home()
    finally:
        log.setLevel(level)


def same_folder(a: Optional[str], b: Optional[str]) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)


# What each tool prints for --version, whatever its release: a binary that runs but prints none of it
# is not that tool (a wrapper gone wrong, /bin/false set as $CUDABENCH_NVCC).
SIGNATURES = {"nvcc": "cuda compil", "nsys": "nsight systems", "ncu": "nsight compute"}


def not_the_tool(path: str, name: str) -> str:
    """'' when `path` answers --version as `name` does, else what it did instead (one sentence)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{path} could not be run with --version ({exc})"
    said = (out.stdout + out.stderr).strip()
    if out.returncode == 0 and SIGNATURES[name] in said.lower():
        return ""
    first = said.splitlines()[0][:120] if said else "nothing"
    return (f"{path} is not {name}: asked for its version, it exited with code {out.returncode} and printed "
            f"{first!r}" if said else f"{path} is not {name}: asked for its version, it exited with code "
            f"{out.returncode} and printed nothing")


def verified(found: Found, name: str, hint: str) -> Found:
    """`found` if it answers --version as `name`; else ToolNotFoundError saying what it is instead."""
    wrong = not_the_tool(found.path, name)
    if wrong:
        raise ToolNotFoundError(f"{wrong} (found via {found.how}).", hint)
    return found


def tool_version(path: str, line: int = -1) -> str:
    """One line of what a tool prints for --version: the last (nvcc, ncu) or the first (compilers)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(could not run: {exc})"
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return lines[line] if lines else ""
