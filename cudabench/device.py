"""What machine we are on: the CUDA device, driver and versions, and NVML clock readings."""

from __future__ import annotations

import datetime
import platform
import socket
from dataclasses import dataclass
from typing import Optional

from cudabench import __version__
from cudabench.errors import NO_GPU_HINT, NoGPUError
from cudabench.results.model import Environment


def require_gpu() -> None:
    """Raise NoGPUError (exit 2) with what still works, when no CUDA device is usable."""
    import torch

    if torch.version.cuda is None:
        raise NoGPUError(
            f"No CUDA device: this torch ({torch.__version__}) is a CPU build, so kernels cannot run here.",
            NO_GPU_HINT)
    if not torch.cuda.is_available():
        raise NoGPUError(
            f"No CUDA device is visible to torch {torch.__version__} (CUDA {torch.version.cuda}): "
            "check the driver with nvidia-smi and CUDA_VISIBLE_DEVICES.", NO_GPU_HINT)


def environment(settings: dict[str, str] | None = None) -> Environment:
    """A record of the software and (when present) the GPU, for results files and table headers."""
    import torch

    env = dict(
        torch=torch.__version__,
        cuda_runtime=str(torch.version.cuda),
        python=platform.python_version(),
        cudabench=__version__,
        hostname=socket.gethostname(),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        settings=tuple(sorted((settings or {}).items())),
    )
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(
            gpu=p.name,
            capability=f"{p.major}.{p.minor}",
            sm_count=p.multi_processor_count,
            l2_bytes=int(getattr(p, "L2_cache_size", 0)),
            memory_bytes=int(p.total_memory),
            driver=nvml_driver_version() or "",
        )
    return Environment(**env)


# ---- NVML (nvidia-ml-py): read-only; cudabench never changes clocks -----------------------------

@dataclass(frozen=True)
class ClockReading:
    sm_mhz: float
    mem_mhz: float
    sm_max_mhz: float
    temperature_c: float
    power_w: float

    def as_pairs(self, prefix: str) -> tuple[tuple[str, float], ...]:
        return tuple((f"{prefix}_{k}", float(v)) for k, v in self.__dict__.items())


def _nvml():
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no device: readings are optional
        return None
    return pynvml


def nvml_driver_version() -> Optional[str]:
    nv = _nvml()
    if nv is None:
        return None
    try:
        v = nv.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return None


def read_clocks(index: Optional[int] = None) -> Optional[ClockReading]:
    """SM and memory clocks, max SM clock, temperature and power of the current device, or None."""
    nv = _nvml()
    if nv is None:
        return None
    try:
        import torch

        if index is None:
            index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        h = nv.nvmlDeviceGetHandleByIndex(index)
        return ClockReading(
            sm_mhz=nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            mem_mhz=nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            sm_max_mhz=nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
            temperature_c=nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            power_w=nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
        )
    except Exception:
        return None

