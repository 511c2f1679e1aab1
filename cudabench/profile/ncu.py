"""Nsight Compute: a fixed metric set for the benchmark's own kernels (only what runs between the
worker's cudaProfilerStart/Stop), with clocks left alone, read back from ncu's raw CSV."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from cudabench.tools import Found, locate

METRICS = {  # metric -> column title
    "gpu__time_duration.sum": "duration",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM %",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM %",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "launch__registers_per_thread": "regs",
    "launch__shared_mem_per_block_static": "smem static",
    "launch__shared_mem_per_block_dynamic": "smem dynamic",
}
BYTE_UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "KB": 1e3, "MB": 1e6, "KiB": 1024, "MiB": 2**20}
TIME_UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3,
              "second": 1.0, "s": 1.0}


# Where ncu usually lives after PATH, newest first within each pattern.
INSTALL_GLOBS = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/nsight-compute-*/ncu",
)


def find_ncu(env: Optional[Mapping[str, str]] = None) -> Found:
    """$CUDABENCH_NCU, then PATH, then the usual install folders."""
    return locate("ncu", INSTALL_GLOBS, env_var="CUDABENCH_NCU", env=env, title="Nsight Compute (ncu)",
                  hint="Install Nsight Compute (it comes with the CUDA toolkit) and put its folder on PATH, or "
                  "set $CUDABENCH_NCU. Without it: `cudabench profile --tool torch` (torch.profiler).")


def ncu_command(ncu: str, report: Path, child: Sequence[str]) -> list[str]:
    """Profile only inside cudaProfilerStart/Stop, never touching the GPU's clocks."""
    return [ncu, "--clock-control", "none", "--profile-from-start", "no", "--metrics", ",".join(METRICS),
            "--export", str(report), "--force-overwrite", *child]


def import_command(ncu: str, report: Path) -> list[str]:
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--metrics", ",".join(METRICS)]


@dataclass(frozen=True)
class NcuRow:
    kernel: str
    values: dict  # metric -> (value as text, unit)

    def number(self, metric: str) -> Optional[float]:
        value, _ = self.values.get(metric, ("", ""))
        try:
            return float(value.replace(",", ""))
        except ValueError:
            return None

    def seconds(self) -> Optional[float]:
        value = self.number("gpu__time_duration.sum")
        unit = self.values.get("gpu__time_duration.sum", ("", ""))[1]
        return None if value is None else value * TIME_UNITS.get(unit, float("nan"))

    def cell(self, metric: str) -> str:
        """A readable value: percentages to one decimal, counts as integers, memory in bytes/KB."""
        value, unit = self.values.get(metric, ("", ""))
        number = self.number(metric)
        if number is None:
            return value or "-"
        if unit == "%":
            return f"{number:.1f}"
        if unit.split("/")[0] in BYTE_UNITS:
            size = number * BYTE_UNITS[unit.split("/")[0]]
            return f"{size / 1e3:.1f} KB" if size >= 1e3 else f"{size:.0f} B"
        return f"{number:g}"


def parse_raw_csv(text: str) -> list[NcuRow]:
    """ncu --csv --page raw: a header row (with "Kernel Name"), a units row, then one row per launch."""
    rows = list(csv.reader(io.StringIO(text)))
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        return []
    header, units = rows[start], rows[start + 1] if start + 1 < len(rows) else []
    name_at = header.index("Kernel Name")
    out = []
    for r in rows[start + 2:]:
        if len(r) != len(header):
            continue
        values = {m: (r[header.index(m)], units[header.index(m)] if units else "")
                  for m in METRICS if m in header}
        out.append(NcuRow(r[name_at], values))
    return out
