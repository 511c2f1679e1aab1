"""Plots of a sweep from a results document: time per call against the swept shape parameter
(log scale), and the speedup over the family's baseline, as a PNG (or any format matplotlib writes,
picked by the file name's suffix), written to exactly the path given. matplotlib is an optional
extra: pip install "cudabench[plot]". INVALID and ERROR results are not drawn (as in the tables).

Within one family, an *axis* is a shape parameter that varies, together with any parameters that
always move with it (M = N = K in a square matmul sweep). Each axis gets a column of two panels.
Along an axis, results that agree on every other varying parameter form a line, one per subject
(variant or baseline) and direction; a "line" of one point belongs to another axis and is left out.
So a suite sweeping T at B=32 and B at T=768 gives a T column and a B column; a full T × B grid
gives lines per B in the T column and lines per T in the B column.
"""

from __future__ import annotations

import importlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from cudabench.errors import ConfigError, ToolNotFoundError
from cudabench.results.records.model import UNTRUSTED

Result = Mapping[str, Any]


@dataclass(frozen=True)
class Line:
    label: str
    role: str
    points: tuple[tuple[int, Result], ...]   # (x, result), sorted by x


@dataclass(frozen=True)
class Panel:
    family: str
    axis: tuple[str, ...]                     # the parameters plotted along x (the first gives x)
    fixed: str                                # what stays the same, e.g. "B=32, C=768"
    lines: tuple[Line, ...]


def matplotlib_classes() -> Any:
    try:
        importlib.import_module("matplotlib")  # first: a missing package fails here, even if submodules are cached
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FixedLocator, NullLocator
    except ImportError:
        raise ToolNotFoundError("Plotting needs matplotlib, which is not installed.",
                                'pip install "cudabench[plot]"') from None
    return Figure, FigureCanvasAgg, FixedLocator, NullLocator


def _image_formats() -> list[str]:
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def check_image_path(path: Path | str) -> str:
    """The format to write `path` in: its suffix, PNG when it has none (or is '-', standard output).
    ConfigError when it is a folder, a device, or a suffix matplotlib cannot write."""
    from cudabench.outputs import output_target
    from cudabench.outputs import writes_to_stdout

    text = str(path)
    if writes_to_stdout(text):
        return "png"
    if text.endswith(("/", os.sep)) or Path(text).is_dir():
        raise ConfigError(f"Cannot write the plot to {text}: it names a folder.",
                          f"Give a file name, e.g. {Path(text) / 'cudabench-plot.png'}")
    output_target(text)  # devices, FIFOs
    suffix = Path(text).suffix.lower().lstrip(".")
    if not suffix:
        return "png"
    matplotlib_classes()
    formats = _image_formats()
    if suffix not in formats:
        raise ConfigError(f"Cannot write the plot to {text}: matplotlib does not write .{suffix} files.",
                          "Use one of " + ", ".join(f".{f}" for f in formats) + " (no suffix: PNG).")
    return suffix


# ---- finding the sweep: pure, testable without matplotlib -------------------------------------

def _tied(shapes: Sequence[Mapping[str, int]], p: str, q: str) -> bool:
    """p and q always move together: each value of one goes with exactly one value of the other."""
    pairs = {(s[p], s[q]) for s in shapes}
    return len(pairs) == len({s[p] for s in shapes}) == len({s[q] for s in shapes})


def sweep_axes(shapes: Sequence[Mapping[str, int]]) -> list[tuple[str, ...]]:
    """Varying parameters, grouped into those that move together; most distinct values first."""
    names = list(dict.fromkeys(k for s in shapes for k in s))
    varying = [p for p in names if len({s.get(p) for s in shapes}) > 1 and all(p in s for s in shapes)]
    axes: list[list[str]] = []
    for p in varying:
        group = next((g for g in axes if _tied(shapes, g[0], p)), None)
        if group:
            group.append(p)
        else:
            axes.append([p])
    return sorted((tuple(g) for g in axes), key=lambda g: -len({s[g[0]] for s in shapes}))


def _lines(results: Sequence[Result], axis: tuple[str, ...], others: Sequence[str]) -> list[Line]:
    """Results grouped by subject, direction, the other varying parameters and precision; one-point
    groups dropped."""
    groups: dict[tuple, dict[int, Result]] = {}
    for r in results:
        shape = r["case"]["shape"]
        key = (r["subject"], r["case"]["direction"], tuple(shape[p] for p in others),
               r["case"].get("dtype", "float32"))
        groups.setdefault(key, {})[shape[axis[0]]] = r     # a repeated point keeps its last copy
    kept = {k: pts for k, pts in groups.items() if len(pts) > 1}
    many_dirs = len({k[1] for k in kept}) > 1
    many_rest = len({k[2] for k in kept}) > 1
    many_dtypes = len({k[3] for k in kept}) > 1
    lines = []
    for (subject, direction, rest, dtype), pts in kept.items():
        label = subject + (f" {direction}" if many_dirs else "") + (f" {dtype}" if many_dtypes else "")
        label += f" ({', '.join(f'{p}={v}' for p, v in zip(others, rest))})" if many_rest else ""
        lines.append(Line(label, next(iter(pts.values())).get("role", ""), tuple(sorted(pts.items()))))
    return lines


def _fixed(lines: Sequence[Line], axis: tuple[str, ...]) -> str:
    """The parameters that keep one value on every line, e.g. 'B=32, C=768'."""
    shapes = [r["case"]["shape"] for line in lines for _, r in line.points]
    same = [p for p in shapes[0] if p not in axis and len({s[p] for s in shapes}) == 1]
    return ", ".join(f"{p}={shapes[0][p]}" for p in same)


def sweep_panels(doc: Mapping[str, Any], parameter: Optional[str] = None) -> list[Panel]:
    """One panel per (family, swept axis) with its lines; only measured results count."""
    measured = [r for r in doc.get("results", []) if r.get("stats") and r.get("status") not in UNTRUSTED]
    panels = []
    for family in dict.fromkeys(r["case"]["family"] for r in measured):
        results = [r for r in measured if r["case"]["family"] == family]
        axes = sweep_axes([r["case"]["shape"] for r in results])
        for axis in axes:
            if parameter and parameter not in axis:
                continue
            others = [p for other in axes if other != axis for p in other]
            lines = _lines(results, axis, others)
            if lines:
                panels.append(Panel(family, axis, _fixed(lines, axis), tuple(lines)))
    if not panels:
        what = f"parameter '{parameter}'" if parameter else "shape parameter"
        raise ConfigError(f"Nothing to plot: no {what} varies across the measured results.",
                          "Plot the results of a sweep, e.g. `cudabench run --config configs/timex-sweep.toml`.")
    return panels


def speedups(panel: Panel) -> tuple[str, list[tuple[Line, list[tuple[int, float]]]]]:
    """The baseline's name and, for each variant line, (x, baseline median / variant median) at
    each x where the same case has a measured baseline (its first one in the document)."""
    base: dict[str, Result] = {}
    for line in panel.lines:
        if line.role == "baseline":
            for _, r in line.points:
                base.setdefault(r["case"]["key"], r)
    name = next(iter(base.values()))["subject"] if base else ""
    out = []
    for line in panel.lines:
        if line.role != "baseline":
            pts = [(x, base[r["case"]["key"]]["stats"]["median"] / r["stats"]["median"])
                   for x, r in line.points if r["case"]["key"] in base and r["stats"]["median"] > 0]
            out.append((line, pts))
    return name, out


# ---- drawing --------------------------------------------------------------------------------------

def _tick(value: int) -> str:
    if value >= 10_000 and value & (value - 1) == 0:
        return f"$2^{{{value.bit_length() - 1}}}$"
    return f"{value:,}".replace(",", " ") if value >= 10_000 else str(value)


def _x_axis(ax: Any, xs: Sequence[int], label: str, locators: tuple[Any, Any]) -> None:
    fixed, null = locators
    if max(xs) >= 4 * min(xs):
        ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(fixed(sorted(set(xs))))
    ax.xaxis.set_minor_locator(null())
    ax.set_xticklabels([_tick(x) for x in sorted(set(xs))])
    ax.set_xlabel(label)


def _draw_times(ax: Any, panel: Panel) -> None:
    for line in panel.lines:
        xs = [x for x, _ in line.points]
        med = [r["stats"]["median"] * 1e6 for _, r in line.points]
        style = "--" if line.role == "baseline" else "-"
        drawn = ax.plot(xs, med, style, marker="o", markersize=4, label=line.label)
        q1 = [r["stats"].get("q1", r["stats"]["median"]) * 1e6 for _, r in line.points]
        q3 = [r["stats"].get("q3", r["stats"]["median"]) * 1e6 for _, r in line.points]
        ax.fill_between(xs, q1, q3, color=drawn[0].get_color(), alpha=0.15, linewidth=0)
    ax.set_yscale("log")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_ylabel("median time per call (µs, log scale)")
    title = f"{panel.family}: time vs {' = '.join(panel.axis)}"
    ax.set_title(title + (f"\n({panel.fixed})" if panel.fixed else ""), fontsize=11)
    ax.legend(fontsize=8)


def _draw_speedups(ax: Any, panel: Panel) -> None:
    name, lines = speedups(panel)
    if not name:
        ax.text(0.5, 0.5, "no baseline measured", ha="center", va="center", transform=ax.transAxes)
        return
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label=f"{name} = 1×")
    for line, pts in lines:
        if pts:
            ax.plot([x for x, _ in pts], [s for _, s in pts], marker="o", markersize=4, label=line.label)
    ax.set_ylabel(f"speedup over {name} (×, higher is faster)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


def has_memory(panel: Panel) -> bool:
    return any(r.get("peak_memory", -1) >= 0 for line in panel.lines for _, r in line.points)


def _draw_memory(ax: Any, panel: Panel) -> None:
    """Peak memory of one call against the swept parameter, log scale (what grows as N² shows)."""
    for line in panel.lines:
        pts = [(x, r["peak_memory"] / (1 << 20)) for x, r in line.points if r.get("peak_memory", -1) > 0]
        if pts:
            ax.plot([x for x, _ in pts], [m for _, m in pts], "--" if line.role == "baseline" else "-", marker="o",
                    markersize=4, label=line.label)
    ax.set_yscale("log")
    ax.set_ylabel("peak memory per call (MiB, log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)


def _suptitle(doc: Mapping[str, Any]) -> str:
    env = doc.get("environment") or {}
    timings = {(r.get("measurement") or {}).get("timing") for r in doc.get("results", []) if r.get("measurement")}
    parts = [f"driver {env['driver']}"] if env.get("driver") else []
    parts += [f"torch {env['torch']}"] if env.get("torch") else []
    parts += [f"timing: {'/'.join(sorted(t for t in timings if t))}"] if any(timings) else []
    return f"cudabench · {env.get('gpu') or 'unknown GPU'}\n" + " · ".join(parts)


def plot_history(histories: Mapping[tuple[str, str, str], Sequence[Any]], out_path: Path | str) -> Path:
    """Each series' median per run (95 % interval as error bars) in run order, change points ringed;
    written to exactly `out_path` (see check_image_path)."""
    Figure, Canvas, _, _ = matplotlib_classes()
    image_format = check_image_path(out_path)
    fig = Figure(figsize=(9, 5), layout="constrained")
    Canvas(fig)
    ax = fig.subplots()
    labels: dict[int, str] = {}
    for (gpu, key, subject), steps in histories.items():
        xs = [s.point.run.id for s in steps]
        ys = [s.median * 1e6 for s in steps]
        errs = [s.median * 1e6 * (s.precision if s.precision == s.precision else 0.0) for s in steps]
        line = ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, label=f"{subject} {key}" + (f" ({gpu})" if len(
            {g for g, _, _ in histories}) > 1 else ""))
        changed = [(x, y) for x, y, s in zip(xs, ys, steps) if s.changed]
        if changed:
            ax.scatter(*zip(*changed), s=220, facecolors="none", edgecolors=line[0].get_color(), linewidths=2)
        labels.update({s.point.run.id: s.point.run.label() for s in steps})
    ax.set_xticks(sorted(labels), [labels[x] for x in sorted(labels)], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("run (commit), oldest first; rings: changed against the run before")
    ax.set_ylabel("median time per call (µs)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("cudabench history")
    return save_figure(fig, out_path, image_format)


def save_figure(fig: Any, out_path: Path | str, image_format: str) -> Path:
    from cudabench.outputs import write_bytes_atomic

    image = io.BytesIO()
    try:
        fig.savefig(image, format=image_format, dpi=120)
    except (OSError, ValueError, RuntimeError) as exc:  # e.g. .pgf without LaTeX
        raise ConfigError(f"Cannot write the plot to {out_path}: {exc}", "Use a .png, .svg or .pdf path.") from None
    write_bytes_atomic(out_path, image.getvalue())  # through symlinks, never half a file
    return Path(out_path)


def plot_sweep(doc: Mapping[str, Any], out_path: Path | str, parameter: Optional[str] = None) -> Path:
    """Write the sweep plot of a results document to exactly `out_path` (see check_image_path) and
    return that path. Raises ToolNotFoundError without matplotlib, ConfigError when nothing (or not
    `parameter`) varies or the path cannot be written."""
    Figure, Canvas, fixed, null = matplotlib_classes()
    image_format = check_image_path(out_path)
    panels = sweep_panels(doc, parameter)
    rows = 3 if any(has_memory(p) for p in panels) else 2  # a memory row when peak memory was recorded
    fig = Figure(figsize=(6.4 * len(panels), 4.25 * rows), layout="constrained")
    Canvas(fig)
    axes = fig.subplots(rows, len(panels), squeeze=False, sharex="col")
    for col, panel in enumerate(panels):
        xs = [x for line in panel.lines for x, _ in line.points]
        _draw_times(axes[0][col], panel)
        _draw_speedups(axes[1][col], panel)
        if rows == 3:
            _draw_memory(axes[2][col], panel)
        _x_axis(axes[rows - 1][col], xs, " = ".join(panel.axis), (fixed, null))  # shared with the panels above
    fig.suptitle(_suptitle(doc), fontsize=12)
    return save_figure(fig, out_path, image_format)
