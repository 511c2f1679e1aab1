"""`cudabench report --html`: one self-contained page for a CI artifact, with no server and no network:
the latest run's results per case (family, shape and precision): a bar chart of its subjects (drawn
as SVG in the page: median and interval, the baseline marked, untrusted subjects named apart) and a
table that fits 800 px (reasons under it); its sweep plot where a parameter varies (and why a plot is
left out), and the history of its subjects across the stored runs. Plots are PNGs inside the page (data: URIs); styles are inline; there is no script. Every text
that comes from results (names, shapes, commands) is escaped, so it shows as written."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from cudabench.results.compare.render import median_text
from cudabench.results.exporters.rows import flat_rows
from cudabench.results.records.model import UNTRUSTED
from cudabench.results.units import fmt_bytes

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1100px; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.6em 0 0.4em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; } th.text, td.text { text-align: left; }
.bad { color: #b00020; font-weight: 600; } .good { color: #1b7f3b; }
.untrusted { color: #888; text-decoration: line-through; }
.meta, .why { color: #555; font-size: 0.9em; } ul.notes { font-size: 0.85em; color: #444; margin-top: 0.2em; }
img { max-width: 100%; border: 1px solid #ddd; } svg.bars { width: 100%; max-width: 720px; display: block; }
svg.bars text { font-size: 12px; font-family: system-ui, sans-serif; } .apart { font-size: 0.85em; color: #555; }
"""

# (header, flat row key): what decides, in a width that fits 800 px (one table per direction, under
# its heading: a direction column took the width a real attention case then lacked); the reasons go
# under the table
COLUMNS = (("subject", "subject"), ("role", "role"), ("status", "status"), ("rel err", "rel_error"),
           ("median ±95% CI", "median"), ("n", "n"), ("peak memory", "peak_memory"), ("timing", "timing"))
TEXT_COLUMNS = {"subject", "role", "status", "timing"}
BAR_WIDTH, LABEL_WIDTH, VALUE_WIDTH, ROW_HEIGHT = 360, 220, 140, 22  # the bar chart, in SVG pixels


@dataclass(frozen=True)
class Figure:
    title: str
    png: bytes


def page(doc: Mapping[str, Any], figures: Sequence[Figure] = (), history: Optional[Mapping[Any, Sequence[Any]]] = None,
         source: str = "", left_out: Sequence[str] = ()) -> str:
    """The whole page for one results document: per case and direction a bar chart of its subjects and
    their table, then its plots (and why any is left out), then (optionally) history series."""
    env = doc.get("environment") or {}
    parts = [f"<h1>cudabench results: {_e(env.get('gpu', ''))}</h1>",
             f"<p class=meta>{_e(_environment_line(env))}<br>command: <code>{_e(doc.get('command', ''))}</code>"
             + (f"<br>source: {_e(source)}" if source else "") + "<br>bars: the median per call under the "
             "run's timer, its 95 % interval as a whisker; untrusted subjects are listed apart, never drawn</p>"]
    for heading, rows in _groups(doc):
        parts.append(f"<h2>{_e(heading)}</h2>")
        for direction in dict.fromkeys(r["direction"] for r in rows):
            these = [r for r in rows if r["direction"] == direction]
            parts += [_bars(these, direction), _table(these)]
    for figure in figures:
        parts.append(f"<h2>{_e(figure.title)}</h2>")
        parts.append(f'<img alt="{_e(figure.title)}" src="data:image/png;base64,'
                     f'{base64.b64encode(figure.png).decode()}">')
    parts += [f"<p class=why>{_e(line)}</p>" for line in left_out]
    if history:
        parts.append("<h2>history across stored runs</h2>")
        parts += [_history_table(key, steps) for key, steps in history.items()]
    title = f"cudabench: {env.get('gpu', 'results')}"
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width, initial-scale=1'>"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def _trusted(row: Mapping[str, Any]) -> bool:
    return row.get("status") == "ok" and row.get("median") is not None


def _bars(rows: Sequence[Mapping[str, Any]], direction: str) -> str:
    """One case's subjects as horizontal bars (SVG, no script): median, 95 % whisker, the baseline
    marked; INVALID, FAILED, ERROR and skipped subjects named apart with why."""
    shown = [r for r in rows if _trusted(r)]
    apart = [f"{r['subject']} {r['status']}" + (f" ({r['skipped']})" if r.get("skipped") else "")
             for r in rows if not _trusted(r)]
    parts = []
    if shown:
        top = max(max(r["median"], r.get("ci_high") or 0.0) for r in shown) * 1.05
        x = lambda seconds: LABEL_WIDTH + BAR_WIDTH * seconds / top  # noqa: E731
        height = ROW_HEIGHT * len(shown) + 6
        body = []
        for i, r in enumerate(shown):
            y = 3 + i * ROW_HEIGHT
            baseline = r.get("role") == "baseline"
            label = r["subject"] + (" (baseline)" if baseline else "")
            body.append(f"<text x='{LABEL_WIDTH - 6}' y='{y + 15}' text-anchor='end'>{_e(label)}</text>")
            body.append(f"<rect x='{LABEL_WIDTH}' y='{y + 3}' width='{x(r['median']) - LABEL_WIDTH:.1f}' height='14' "
                        f"fill='{'#9aa5b1' if baseline else '#3b6fb6'}'><title>{_e(label)}</title></rect>")
            if r.get("ci_low") is not None and r.get("ci_high") is not None:
                lo, hi = x(r["ci_low"]), x(r["ci_high"])
                body.append(f"<path d='M{lo:.1f} {y + 10}H{hi:.1f}M{lo:.1f} {y + 6}V{y + 14}M{hi:.1f} {y + 6}"
                            f"V{y + 14}' stroke='#222' fill='none'/>")
            body.append(f"<text x='{LABEL_WIDTH + BAR_WIDTH + 6}' y='{y + 15}'>{_e(_median(r))}</text>")
        width = LABEL_WIDTH + BAR_WIDTH + VALUE_WIDTH
        parts.append(f"<svg class=bars role=img aria-label='{_e(direction)}: median per subject' "
                     f"viewBox='0 0 {width} {height}'>" + "".join(body) + "</svg>")
    if apart:
        parts.append(f"<p class=apart>{_e(direction)}, not drawn: " + " · ".join(_e(a) for a in apart) + "</p>")
    return f"<h3>{_e(direction)}</h3>" + "".join(parts)


def _median(row: Mapping[str, Any]) -> str:
    median, low, high = row.get("median"), row.get("ci_low"), row.get("ci_high")
    precision = (high - low) / 2 / median if median and low is not None and high is not None else float("nan")
    return median_text(median, precision)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _environment_line(env: Mapping[str, Any]) -> str:
    keys = ("gpu", "driver", "torch", "cuda_runtime", "cudabench", "date")
    return " · ".join(f"{k} {env[k]}" for k in keys if env.get(k))


def _groups(doc: Mapping[str, Any]) -> Iterable[tuple[str, list[Mapping[str, Any]]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in flat_rows(doc):
        groups.setdefault(f"{row['family']}  {row['shape']}  {row['dtype']}", []).append(row)
    return groups.items()


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Every subject of a case, its figures struck through where they are not results; each reason
    (a skip, an error, a failed integrity check) as a note under the table, where it has room."""
    head = "".join(f"<th class='{'text' if key in TEXT_COLUMNS else ''}'>{_e(title)}</th>" for title, key in COLUMNS)
    body, notes = [], []
    for row in rows:
        cells = []
        untrusted = row.get("status") in UNTRUSTED
        for _, key in COLUMNS:
            value = row.get(key, "")
            css = "text" if key in TEXT_COLUMNS else ""
            if key == "status" and value not in ("ok", "pass"):
                css += " bad"
            elif untrusted and key not in TEXT_COLUMNS and key != "rel_error":
                css += " untrusted"  # an INVALID or crashed subject's figures: struck through and grey
            cells.append(f"<td class='{css.strip()}'>{_e(_cell(key, row))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
        if row.get("skipped"):
            notes.append(f"<li>{_e(row['subject'])} ({_e(row['direction'])}): {_e(row['skipped'])}</li>")
    return (f"<table><tr>{head}</tr>\n" + "\n".join(body) + "</table>"
            + (f"<ul class=notes>{''.join(notes)}</ul>" if notes else ""))


def _cell(key: str, row: Mapping[str, Any]) -> str:
    value = row.get(key)
    if value in (None, ""):
        return ""
    if key == "median":
        return _median(row)
    if key == "peak_memory":
        return fmt_bytes(value)
    if key == "rel_error":
        return f"{float(value):.1e}"
    return str(value)


def _history_table(key: Any, steps: Sequence[Any]) -> str:
    gpu, case, subject = key
    rows = []
    for step in steps:
        run = step.point.run
        css = "bad" if step.verdict == "slower" else "good" if step.verdict == "faster" else ""
        rows.append(f"<tr><td>{run.id}</td><td class=text>{_e(run.label())}</td><td class=text>{_e(run.created)}</td>"
                    f"<td>{_e(median_text(step.median, step.precision))}</td>"
                    f"<td>{f'{step.ratio:.3f}' if step.verdict else ''}</td>"
                    f"<td class='text {css}'>{_e(('CHANGE: ' if step.changed else '') + step.verdict)}</td></tr>")
    return (f"<h3>{_e(subject)}  {_e(case)}" + (f"  on {_e(gpu)}" if gpu else "") + "</h3>"
            "<table><tr><th>run</th><th>commit</th><th>date</th><th>median</th><th>vs run before</th>"
            "<th>verdict</th></tr>\n" + "\n".join(rows) + "</table>")
