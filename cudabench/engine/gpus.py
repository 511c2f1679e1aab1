"""The GPUs of this host, without torch: what `--gpus all` or `--gpus 0,2` means, and the
environment that pins one worker to one of them. Indices are NVML's (nvidia-smi's), which
CUDA_VISIBLE_DEVICES does not renumber; a worker is pinned by UUID, so CUDA and NVML agree on
which GPU it has."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from cudabench.errors import ShapeError


@dataclass(frozen=True)
class Gpu:
    index: int      # NVML's index
    name: str
    uuid: str

    def env(self) -> dict[str, str]:
        """Environment variables that give a worker this GPU and no other, as its CUDA device 0."""
        return {"CUDA_VISIBLE_DEVICES": self.uuid or str(self.index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    def label(self) -> str:
        return f"GPU {self.index} ({self.name})"


def parse_listing(text: str) -> list[Gpu]:
    """nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader output."""
    found = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            found.append(Gpu(int(parts[0]), ",".join(parts[1:-1]), parts[-1]))
    return found


def visible(gpus: Sequence[Gpu], setting: Optional[str]) -> list[Gpu]:
    """The GPUs a CUDA_VISIBLE_DEVICES value leaves (indices or UUIDs, or UUID prefixes, in its order;
    CUDA stops at the first entry it cannot match)."""
    if setting is None:
        return list(gpus)
    kept: list[Gpu] = []
    for entry in (e.strip() for e in setting.split(",")):
        match = [g for g in gpus if (entry.isdigit() and g.index == int(entry))
                 or (entry.startswith(("GPU-", "MIG-")) and g.uuid.startswith(entry))]
        if len(match) != 1 or match[0] in kept:
            break
        kept.append(match[0])
    return kept


def detect(query: Optional[Callable[[], str]] = None) -> list[Gpu]:
    """This host's GPUs that CUDA_VISIBLE_DEVICES leaves visible, from nvidia-smi."""
    if query is None:
        query = _nvidia_smi
    return visible(parse_listing(query()), os.environ.get("CUDA_VISIBLE_DEVICES"))


def _nvidia_smi() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise ShapeError("--gpus needs nvidia-smi to list this host's GPUs, and it is not on PATH.",
                         "Install the NVIDIA driver's utilities, or run on one GPU (leave out --gpus).")
    try:
        done = subprocess.run([smi, "--query-gpu=index,name,uuid", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ShapeError(f"nvidia-smi could not list the GPUs: {exc}") from None
    if done.returncode != 0:
        raise ShapeError(f"nvidia-smi could not list the GPUs: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def select(spec: str, available: Sequence[Gpu]) -> list[Gpu]:
    """`all`, or a comma-separated list of NVML indices, among the visible GPUs."""
    spec = spec.strip()
    if not available:
        raise ShapeError("--gpus: no GPU is visible on this host (nvidia-smi lists none, or "
                         "CUDA_VISIBLE_DEVICES hides them all).")
    if spec == "all":
        return list(available)
    by_index = {g.index: g for g in available}
    chosen: list[Gpu] = []
    for item in (i.strip() for i in spec.split(",")):
        if not item.isdigit() or int(item) not in by_index:
            known = ", ".join(str(g.index) for g in available)
            raise ShapeError(f"--gpus {spec}: '{item}' is not a GPU index here.",
                             f"Visible GPUs: {known} (or 'all').")
        if by_index[int(item)] not in chosen:
            chosen.append(by_index[int(item)])
    return chosen
