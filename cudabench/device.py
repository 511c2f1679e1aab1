"""What machine we are on: the CUDA device, driver and versions, and NVML clock readings."""

from __future__ import annotations

import datetime
import platform
import socket
from dataclasses import dataclass
from typing import Any, Optional

from cudabench import __version__
from cudabench.errors import NO_GPU_HINT, NoGPUError
from cudabench.results.records.model import Environment


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
        env.update(zip(("gpu_index", "gpu_uuid"), gpu_identity()))
    return Environment(**env)


def gpu_identity() -> tuple[int, str]:
    """(NVML index, UUID) of torch's current device, found by its UUID: CUDA_VISIBLE_DEVICES
    renumbers devices for CUDA but not for NVML, so CUDA's device 0 may be NVML's GPU 3.
    (-1, "") where either is unknown."""
    global _IDENTITY
    if _IDENTITY is not None:
        return _IDENTITY
    import torch

    uuid, index = "", -1
    try:
        uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
        uuid = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    except Exception:  # an old torch without .uuid: NVML's numbering is then a guess
        uuid = ""
    nv = nvml_loaded()
    if nv is not None and uuid:
        try:
            index = int(nv.nvmlDeviceGetIndex(nv.nvmlDeviceGetHandleByUUID(uuid)))
        except Exception:
            index = -1
    _IDENTITY = (index, uuid)
    return _IDENTITY


_IDENTITY: Optional[tuple[int, str]] = None


# ---- NVML (nvidia-ml-py): read-only; cudabench never changes clocks -----------------------------

@dataclass(frozen=True)
class ClockReading:
    sm_mhz: float
    mem_mhz: float
    sm_max_mhz: float
    temperature_c: float
    power_w: float
    reasons: int = 0            # NVML's clock event (throttle) reasons, a bitmask

    def as_pairs(self, prefix: str) -> tuple[tuple[str, float], ...]:
        return tuple((f"{prefix}_{k}", float(v)) for k, v in self.__dict__.items())


def nvml_loaded() -> Any:
    """The pynvml module with its library loaded (it sets `pynvml.nvmlLib` on first init), or None."""
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
    nv = nvml_loaded()
    if nv is None:
        return None
    try:
        v = nv.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return None


def _clock_event_reasons(nv: Any, handle: Any) -> int:
    """Why the clocks are what they are (NVML renamed throttle reasons to clock event reasons)."""
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        query = getattr(nv, name, None)
        if query is not None:
            try:
                return int(query(handle))
            except Exception:
                return 0
    return 0


@dataclass(frozen=True)
class NvmlDevice:
    """A device's NVML handle and its maximum SM clock, found once for a series of readings: finding the
    handle and asking the maximum clock take longer than a reading (1.4 ms against µs on the H200)."""

    nv: Any
    handle: Any
    sm_max_mhz: float


def nvml_device(index: Optional[int] = None) -> Optional[NvmlDevice]:
    """The current device (NVML's `index`, by default the one gpu_identity finds), or None."""
    nv = nvml_loaded()
    if nv is None:
        return None
    try:
        import torch

        if index is None:
            _, uuid = gpu_identity() if torch.cuda.is_available() else (-1, "")
            h = nv.nvmlDeviceGetHandleByUUID(uuid) if uuid else nv.nvmlDeviceGetHandleByIndex(0)
        else:
            h = nv.nvmlDeviceGetHandleByIndex(index)
        return NvmlDevice(nv, h, nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))
    except Exception:
        return None


def read_clocks(index: Optional[int] = None, device: Optional[NvmlDevice] = None) -> Optional[ClockReading]:
    """SM and memory clocks, max SM clock, temperature and power of the current device (NVML's
    `index`, by default the one gpu_identity finds; or `device`, from nvml_device), or None."""
    found = device if device is not None else nvml_device(index)
    if found is None:
        return None
    nv, h = found.nv, found.handle
    try:
        return ClockReading(
            sm_mhz=nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
            mem_mhz=nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
            sm_max_mhz=found.sm_max_mhz,
            temperature_c=nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
            power_w=nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
            reasons=_clock_event_reasons(nv, h),
        )
    except Exception:
        return None

