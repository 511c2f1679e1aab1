"""`cudabench report --html`: one self-contained page for a CI artifact, with no server and no network:
the latest run's results as tables (one per family, case shape and precision, as the terminal shows
them), its sweep plot where a parameter varies, and the history of its subjects across the stored
runs. Plots are PNGs inside the page (data: URIs); styles are inline; there is no script. Every text
that comes from results (names, shapes, commands) is escaped, so it shows as written."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from cudabench.results.compare.render import median_text
from cudabench.results.exporters.rows import flat_rows
from cudabench.results.records.model import UNTRUSTED
from cudabench.results.units import fmt_bytes, fmt_time

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td.text { text-align: left; }
.bad { color: #b00020; font-weight: 600; } .good { color: #1b7f3b; }
.untrusted { color: #888; text-decoration: line-through; }
.meta { color: #555; font-size: 0.9em; } img { max-width: 100%; border: 1px solid #ddd; }
"""

COLUMNS = (("subject", "subject"), ("role", "role"), ("dir", "direction"), ("status", "status"),
           ("rel err", "rel_error"), ("median", "median"), ("95 % CI low", "ci_low"), ("95 % CI high", "ci_high"),
           ("n", "n"), ("peak memory", "peak_memory"), ("timing", "timing"), ("note", "skipped"))
TEXT_COLUMNS = {"subject", "role", "direction", "status", "timing", "skipped"}


@dataclass(frozen=True)
class Figure:
    title: str
    png: bytes


def page(doc: Mapping[str, Any], figures: Sequence[Figure] = (), history: Optional[Mapping[Any, Sequence[Any]]] = None,
         source: str = "") -> str:
    """The whole page for one results document, its plots, and (optionally) history series."""
    env = doc.get("environment") or {}
    parts = [f"<h1>cudabench results: {_e(env.get('gpu', ''))}</h1>",
             f"<p class=meta>{_e(_environment_line(env))}<br>command: <code>{_e(doc.get('command', ''))}</code>"
             + (f"<br>source: {_e(source)}" if source else "") + "</p>"]
    for heading, rows in _groups(doc):
        parts.append(f"<h2>{_e(heading)}</h2>")
        parts.append(_table(rows))
    for figure in figures:
        parts.append(f"<h2>{_e(figure.title)}</h2>")
        parts.append(f'<img alt="{_e(figure.title)}" src="data:image/png;base64,'
                     f'{base64.b64encode(figure.png).decode()}">')
    if history:
        parts.append("<h2>history across stored runs</h2>")
        parts += [_history_table(key, steps) for key, steps in history.items()]
    title = f"cudabench: {env.get('gpu', 'results')}"
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


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

    head = "".join(f"<th>{_e(title)}</th>" for title, _ in COLUMNS)
    body = []
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
            cells.append(f"<td class='{css.strip()}'>{_e(_cell(key, value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>\n" + "\n".join(body) + "</table>"


def _cell(key: str, value: Any) -> str:

    if value in (None, ""):
        return ""
    if key in ("median", "ci_low", "ci_high"):
        return fmt_time(float(value))
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
