"""What each NVML call of read_clocks costs on this machine (median of 50, ms)."""
import statistics, time
import torch
from cudabench.device import gpu_identity, read_clocks
import pynvml as nv
nv.nvmlInit()
torch.cuda.init()
_, uuid = gpu_identity()
h = nv.nvmlDeviceGetHandleByUUID(uuid)
calls = {
    "nvmlInit": lambda: nv.nvmlInit(),
    "handle_by_uuid": lambda: nv.nvmlDeviceGetHandleByUUID(uuid),
    "clock_sm": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
    "clock_mem": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
    "max_clock_sm": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
    "temperature": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
    "power": lambda: nv.nvmlDeviceGetPowerUsage(h),
    "reasons": lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
    "read_clocks": lambda: read_clocks(),
}
for name, f in calls.items():
    t = []
    for _ in range(50):
        a = time.perf_counter(); f(); t.append(time.perf_counter() - a)
    print(f"{name:16} {statistics.median(t)*1e3:7.3f} ms  (max {max(t)*1e3:.3f})")
