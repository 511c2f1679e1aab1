"""`cudabench profile`: re-launch cudabench itself as a worker under nsys, ncu or torch.profiler,
then turn what the tool wrote into tables. The child command line is built by one pure function."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from cudabench.profile import ncu as ncu_tool
from cudabench.profile import nsys as nsys_tool
from cudabench.errors import CudabenchError
from cudabench.profile.nsys import with_ext

TOOLS = ("nsys", "ncu", "torch")
DEFAULT_ITERATIONS = {"nsys": 20, "ncu": 1, "torch": 20}
OUTPUTS = (".worker.json", ".nsys-rep", ".qdstrm", ".sqlite", ".ncu-rep", ".ncu.csv", ".trace.json")


@dataclass(frozen=True)
class ProfileRequest:
    kernel: str
    tool: str = "nsys"
    shape: str = ""
    direction: str = "fwd"
    out_dir: Path = Path("cudabench-profiles")
    name: str = ""
    iterations: int = 0
    seed: int = 0
    kernels_dirs: tuple[Path, ...] = ()
    python: str = field(default=sys.executable)

    @property
    def base(self) -> Path:
        """The report path without suffix: OUT_DIR/NAME (default NAME: kernel-direction-tool)."""
        return self.out_dir / (self.name or f"{self.kernel}-{self.direction}-{self.tool}")

    @property
    def iters(self) -> int:
        return self.iterations or DEFAULT_ITERATIONS[self.tool]


def worker_command(req: ProfileRequest) -> list[str]:
    cmd = [req.python, "-m", "cudabench", "worker", "--kernel", req.kernel, "--direction", req.direction,
           "--tool", req.tool, "--iters", str(req.iters), "--seed", str(req.seed),
           "--summary", str(with_ext(req.base, ".worker.json"))]
    if req.shape:
        cmd += ["--shape", req.shape]
    if req.tool == "torch":
        cmd += ["--trace", str(with_ext(req.base, ".trace.json"))]
    for d in req.kernels_dirs:
        cmd += ["--kernels-dir", str(d)]
    return cmd


def child_command(req: ProfileRequest, tool_path: Optional[str]) -> list[str]:
    """The whole command line the parent runs: the tool wrapping the worker (torch: the worker alone)."""
    worker = worker_command(req)
    if req.tool == "nsys":
        return nsys_tool.nsys_command(tool_path, req.base, worker)
    if req.tool == "ncu":
        return ncu_tool.ncu_command(tool_path, with_ext(req.base, ".ncu-rep"), worker)
    return worker


def run_child(command: Sequence[str], env: dict, echo: Callable[[str], None]) -> tuple[int, str]:
    """Run, echoing each output line as it comes, and keep the text for error messages."""
    lines = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for line in proc.stdout:
            lines.append(line)
            echo(line.rstrip("\n"))
        rc = proc.wait()
    return rc, "".join(lines)


def read_summary(req: ProfileRequest, rc: int, log: str) -> dict:
    path = with_ext(req.base, ".worker.json")
    if not path.is_file():
        raise CudabenchError(f"The profiled worker failed (exit {rc}) before its timed region ended: "
                             f"{nsys_tool.last_line(log)}",
                             "Its full output is printed above; `cudabench run` on the same case shows more.")
    return json.loads(path.read_text())


def child_env(req: ProfileRequest, tool_path: Optional[str]) -> tuple[dict, str]:
    """The environment for the child, with the NVTX backend this nsys can record, and why when it
    is not the nvtx package."""
    env = dict(os.environ)
    backend, why = "nvtx", ""
    if req.tool == "nsys":
        try:
            import importlib.metadata as md

            pkg = md.version("nvtx")
        except Exception:
            pkg = None
        backend, why = nsys_tool.nvtx_backend_for(nsys_tool.nsys_version(tool_path), pkg)
    env["CUDABENCH_NVTX_BACKEND"] = backend
    return env, why
