"""The synchronisation lesson as a picture: for each of the tutorial's four placements, a few
iterations on one time axis, the host's lane (warm-up launches, launches, synchronize waits, and the
span its clock measured) above the GPU's (the queued earlier work and the kernels), each mode titled
with its figure and whether that figure is a measurement."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

COLORS = {"warm-up": "#c7c7c7", "launch": "#1f77b4", "synchronize": "#ff7f0e", "busy": "#9e9e9e",
          "kernel": "#2ca02c"}
HOST_Y, GPU_Y, HEIGHT = 1.0, 0.0, 0.6


def plot_timeline(spans: Sequence[Mapping[str, Any]], headings: Mapping[str, tuple[str, bool]], title: str,
                  out_path: Path | str, x_label: str = "µs since the mode began") -> Path:
    """Draw `spans` (dicts: mode, lane "host" or "gpu", kind, start, end in µs), one panel per mode
    headed by headings[mode] = (text, whether its figure is a measurement: the clock brackets are
    green if so, else red), to exactly `out_path`."""
    from cudabench.results.plots.sweep import check_image_path, matplotlib_classes, save_figure

    Figure, Canvas, _, _ = matplotlib_classes()
    image_format = check_image_path(out_path)
    modes = list(dict.fromkeys(s["mode"] for s in spans))
    fig = Figure(figsize=(12, 2.3 * len(modes) + 1), layout="constrained")
    Canvas(fig)
    axes = fig.subplots(len(modes), 1, sharex=True, squeeze=False)[:, 0]
    for ax, mode in zip(axes, modes):
        _draw_mode(ax, [s for s in spans if s["mode"] == mode], headings.get(mode, (mode, True)))
    axes[-1].set_xlabel(x_label)
    present = {s["kind"] for s in spans}
    handles = [_patch(color, kind) for kind, color in COLORS.items() if kind in present]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=8)
    fig.suptitle(title, fontsize=11)
    return save_figure(fig, out_path, image_format)


def _patch(color: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=color, label=label)


def _draw_mode(ax: Any, spans: Sequence[Mapping[str, Any]], heading: tuple[str, bool]) -> None:
    for lane, y in (("host", HOST_Y), ("gpu", GPU_Y)):
        for s in spans:
            if s["lane"] == lane and s["kind"] != "clock":
                ax.broken_barh([(s["start"], max(s["end"] - s["start"], 0.05))], (y - HEIGHT / 2, HEIGHT),
                               facecolors=COLORS.get(s["kind"], "#000000"), edgecolor="none")
    text, valid = heading
    clock_color = "#2ca02c" if valid else "#d62728"
    clocks = [s for s in spans if s["kind"] == "clock"]
    for i, s in enumerate(clocks):  # the measured spans: brackets above the host lane, labels staggered
        top = HOST_Y + HEIGHT / 2 + 0.12
        ax.plot([s["start"], s["start"], s["end"], s["end"]], [top - 0.08, top, top, top - 0.08],
                color=clock_color, linewidth=1.5)
        ax.text((s["start"] + s["end"]) / 2, top + 0.04 + 0.22 * (i % 3), f"{s['end'] - s['start']:.1f} µs",
                ha="center", va="bottom", fontsize=7, color=clock_color)
    ax.set_yticks([GPU_Y, HOST_Y], ["GPU", "host"])
    ax.set_ylim(-0.6, 2.3)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(text, fontsize=9, loc="left", color="black" if valid else "#d62728")
