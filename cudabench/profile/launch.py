"""`cudabench profile`: re-launch a cudabench worker (the same worker `run` uses, answering one
request) under nsys, ncu or torch.profiler. The child command line is built by pure functions."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from cudabench.engine.protocol import Hello, Profile, request
from cudabench.profile import ncu as ncu_tool
from cudabench.profile import nsys as nsys_tool
from cudabench.errors import CudabenchError
from cudabench.profile.nsys import with_ext
from cudabench.results.records.model import Case

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
    case: Optional[Case] = None                # the planned case (family, shape, direction, inputs)
    timeline: Optional[Path] = None             # nsys: also draw the first calls' timeline here

    @property
    def base(self) -> Path:
        """The report path without suffix: OUT_DIR/NAME (default NAME: kernel-direction-tool)."""
        return self.out_dir / (self.name or f"{self.kernel}-{self.direction}-{self.tool}")

    @property
    def iters(self) -> int:
        return self.iterations or DEFAULT_ITERATIONS[self.tool]


def worker_request(req: ProfileRequest) -> dict:
    """The one request the profiled worker answers (its hello is nested: it starts and exits alone)."""
    hello = Hello(tuple(str(d) for d in req.kernels_dirs), ceilings=False, nvtx=True, nvtx_iterations=True)
    if req.case is None:
        raise ValueError("a profile request needs its planned case")
    return request(Profile(hello, req.case.family, req.case, req.kernel, req.seed, req.tool, req.iters,
                           trace=str(with_ext(req.base, ".trace.json")) if req.tool == "torch" else None))


def worker_command(req: ProfileRequest) -> list[str]:
    return [req.python, "-m", "cudabench.engine.worker", "--request", json.dumps(worker_request(req))]


def child_command(req: ProfileRequest, tool_path: Optional[str]) -> list[str]:
    """The whole command line the parent runs: the tool wrapping the worker (torch: the worker alone)."""
    worker = worker_command(req)
    if req.tool == "nsys":
        return nsys_tool.nsys_command(tool_path, req.base, worker)
    if req.tool == "ncu":
        return ncu_tool.ncu_command(tool_path, with_ext(req.base, ".ncu-rep"), worker)
    return worker


def read_summary(rc: int, log: str, reply: Optional[dict]) -> dict:
    """The worker's summary, or a clear error with the worker's last words."""
    if reply is None or reply.get("type") != "profile":
        said = (reply or {}).get("message") or nsys_tool.last_line(log)
        raise CudabenchError(f"The profiled worker failed (exit {rc}) before its timed region ended: {said}",
                             "Its full output is printed above; `cudabench run` on the same case shows more.")
    return reply["summary"]


def keep_summary(req: ProfileRequest, summary: dict) -> Path:
    """The worker's summary beside the report (its CUDA-event figure, check errors, NVTX backend)."""
    path = with_ext(req.base, ".worker.json")
    path.write_text(json.dumps(summary, indent=1))
    return path


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
