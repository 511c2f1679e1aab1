"""The device's own ceilings, measured once and cached per GPU: device-to-device copy bandwidth
(bytes read + written per second) from DRAM and within L2, GEMM throughput per precision (cuBLAS:
fp32 with TF32 off, and bf16 / fp16 on tensor cores with float32 sums), and the theoretical fp32 FMA
peak at the maximum SM clock. Runs show each kernel's share of the ceiling that bounds it."""

# torch is imported where a ceiling is measured: reading the recorded ones needs none.

from __future__ import annotations

import datetime
import json
import os
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Callable, Optional

from cudabench.spec.build import cache_root

# FP32 FMA lanes per SM by compute capability (sm_70 and sm_80: 64; sm_86 on: 128)
FP32_LANES = {"7.0": 64, "7.2": 64, "7.5": 64, "8.0": 64}
FP32_LANES_DEFAULT = 128


@dataclass(frozen=True)
class Ceilings:
    gpu: str
    driver: str
    copy_bytes_per_s: float
    sgemm_flops: float
    fma_flops: float
    measured: str
    l2_bytes_per_s: float = 0.0   # a copy whose source and destination fit in L2 together (hot)
    bf16_gemm_flops: float = 0.0  # the tensor-core ceilings: cuBLAS GEMM in bfloat16 / float16
    fp16_gemm_flops: float = 0.0

    def gemm_flops(self, dtype: str) -> float:
        """The GEMM ceiling of a precision (0 when unknown)."""
        return {"float32": self.sgemm_flops, "bfloat16": self.bf16_gemm_flops,
                "float16": self.fp16_gemm_flops}.get(dtype, 0.0)

    def of(self, bound: str, flops: float, nbytes: float, seconds: float,
           dtype: str = "float32") -> Optional[float]:
        """Fraction of the ceiling a kernel reached: memory → bytes/s vs copy; sgemm → flop/s vs
        the GEMM of the case's precision (tensor cores for bf16 / fp16); fma → flop/s vs the fp32
        FMA peak (float32 cases only)."""
        fma = self.fma_flops if dtype == "float32" else 0.0
        ceiling, amount = {"memory": (self.copy_bytes_per_s, nbytes), "sgemm": (self.gemm_flops(dtype), flops),
                           "fma": (fma, flops)}.get(bound, (0.0, 0.0))
        if seconds <= 0 or ceiling <= 0 or not amount:
            return None
        return amount / seconds / ceiling

    def describe(self) -> str:
        within = f"{self.l2_bytes_per_s / 1e12:.2f}" if self.l2_bytes_per_s > 0 else "not measured: CUPTI saw no copy"
        return (f"ceilings ({self.measured}): copy {self.copy_bytes_per_s / 1e12:.2f} TB/s (within L2 "
                f"{within}), SGEMM "
                f"{self.sgemm_flops / 1e12:.1f} TFLOP/s (TF32 off), bf16 / fp16 GEMM "
                f"{self.bf16_gemm_flops / 1e12:.0f} / {self.fp16_gemm_flops / 1e12:.0f} TFLOP/s (tensor cores), "
                f"fp32 FMA peak {self.fma_flops / 1e12:.1f} TFLOP/s")


def median_event_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds of `fn` between CUDA events, after three untimed calls."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def _copy_bandwidth(n: int = 1 << 28) -> float:
    """Bytes read + written per second by a device-to-device copy of n floats (1 GiB: beyond L2)."""
    import torch

    src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
    return 2 * 4 * n / median_event_seconds(lambda: dst.copy_(src), 20)


def _l2_bandwidth(l2_bytes: int) -> float:
    """Bytes read + written per second by a copy whose source and destination fit in L2 together,
    from the copy kernel's own CUPTI duration: back-to-back launches of so short a copy would
    measure launch gaps, not L2. The faster of two sizes (a quarter and half of L2 in all)."""
    import torch

    from cudabench.measure.loop import Warmup, measure
    from cudabench.measure.stop import FixedCount
    from cudabench.measure.timers import CuptiTimer

    best = 0.0
    for share in (8, 4):
        n = max(1 << 16, l2_bytes // share // 4)
        src, dst = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
        kernel = measure(lambda: dst.copy_(src), CuptiTimer(), FixedCount(50), Warmup(5, 0.0),
                         torch.cuda.synchronize)
        seconds = statistics.median(kernel.samples)
        if seconds > 0:
            best = max(best, 2 * 4 * n / seconds)
    return best


def _gemm_flops(dtype: Any, m: int = 8192) -> float:
    """flop/s of cuBLAS's m x m x m matmul in `dtype`: float32 with TF32 off, the 16-bit types on
    tensor cores (at this size cuBLAS does not split k, so its sums stay float32)."""
    import torch

    a, b = torch.rand(m, m, device="cuda", dtype=dtype), torch.rand(m, m, device="cuda", dtype=dtype)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return 2 * m**3 / median_event_seconds(lambda: torch.matmul(a, b), 10)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def measure() -> Ceilings:
    import torch

    from cudabench.device import environment, read_clocks

    env = environment()
    copy = _copy_bandwidth()
    sgemm = _gemm_flops(torch.float32)
    bf16, fp16 = _gemm_flops(torch.bfloat16), _gemm_flops(torch.float16)
    clocks = read_clocks()
    max_hz = (clocks.sm_max_mhz if clocks else 0) * 1e6
    fma = env.sm_count * FP32_LANES.get(env.capability, FP32_LANES_DEFAULT) * 2 * max_hz  # 0 without NVML
    l2 = _l2_bandwidth(env.l2_bytes) if env.l2_bytes else 0.0
    return Ceilings(env.gpu, env.driver, copy, sgemm, fma, datetime.date.today().isoformat(), l2, bf16, fp16)


def _path():
    # each format has its own file (2: the L2 ceiling; 3: the tensor-core GEMMs): an older cudabench
    # reading a newer entry would stop at the new key
    return cache_root() / "ceilings-3.json"


def load(gpu: str, driver: str) -> Optional[Ceilings]:
    try:
        data = json.loads(_path().read_text())
    except (OSError, ValueError):
        return None
    entry = data.get(f"{gpu} / {driver}")
    if not isinstance(entry, dict) or "bf16_gemm_flops" not in entry:
        return None  # absent, or written before the tensor-core ceilings existed: measure again
    try:
        return Ceilings(**entry)
    except TypeError:
        return None


def save(c: Ceilings) -> None:
    path = _path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[f"{c.gpu} / {c.driver}"] = asdict(c)
    path.parent.mkdir(parents=True, exist_ok=True)
    # atomically: the workers of a multi-GPU run measure and save at the same moment
    temp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(data, indent=1))
    os.replace(temp, path)


def get(remeasure: bool = False) -> Optional[Ceilings]:
    """This GPU's ceilings from the cache, measured (about a second) when missing or asked; None
    when they cannot be measured (e.g. too little free memory for the 2 GiB copy)."""
    from cudabench.device import environment

    env = environment()
    cached = None if remeasure else load(env.gpu, env.driver)
    if cached is not None:
        return cached
    try:
        fresh = measure()
    except RuntimeError:
        return None
    save(fresh)
    return fresh
