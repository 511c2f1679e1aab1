"""`cudabench report --html`: one self-contained page (no script, nothing fetched), the run's tables,
its plots inside the page, the history section, and every name shown as written."""

import dataclasses
import os
import shutil
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from cudabench.cli.app import app
from cudabench.results.report.html import Figure, page
from cudabench.results.store.database import Store
from cudabench.results.store.provenance import Provenance
from synthetic import doc, measured, timex_sweep


class Outline(HTMLParser):
    """What a reader of the page gets: headings, table rows, images, anything that would load."""

    def __init__(self):
        super().__init__()
        self.headings, self.rows, self.images, self.loads, self.text = [], 0, [], [], []
        self._in = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("h1", "h2", "h3"):
            self._in = tag
            self.headings.append("")
        if tag == "tr":
            self.rows += 1
        if tag == "img":
            self.images.append(attrs.get("src", ""))
        if tag in ("script", "iframe", "link", "object", "embed") or (tag == "img" and not
                                                                      attrs.get("src", "").startswith("data:")):
            self.loads.append(tag)

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        self.text.append(data)
        if self._in:
            self.headings[-1] += data


def outline(text):
    parser = Outline()
    parser.feed(text)
    return parser


def test_a_page_holds_the_tables_and_plots_and_loads_nothing():
    sweep = timex_sweep()
    html = page(sweep, [Figure("sweep", b"\x89PNG fake")], source="sweep.json")
    seen = outline(html)
    assert seen.headings[0] == "cudabench results: NVIDIA H100 80GB HBM3"
    assert "timex  B=32,C=768,T=768  float32" in seen.headings and "sweep" in seen.headings
    assert seen.rows == len(sweep["results"]) + len([h for h in seen.headings if h.startswith("timex")])  # + headers
    assert seen.images == ["data:image/png;base64,iVBORyBmYWtl"] and seen.loads == []
    assert "http" not in html.replace("http-equiv", "")


def test_names_from_results_are_escaped_not_interpreted():
    hostile = doc([measured("timex", {"B": 1, "C": 1, "T": 8}, "<script>alert(1)</script>[/b]", 1e-3)],
                  command="cudabench run -k '<img src=x onerror=alert(1)>'")
    html = page(hostile)
    seen = outline(html)
    assert seen.loads == [] and seen.images == []
    assert "<script>alert(1)</script>[/b]" in "".join(seen.text)  # shown as written
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_report_command_from_a_store_with_history(tmp_path):
    pytest.importorskip("matplotlib")
    store = tmp_path / "s.db"
    with Store(store) as opened:
        for i, speed in enumerate((1.0, 1.0, 1.3)):
            opened.append(timex_sweep(speed), Provenance(f"{i:x}" * 40, False), f"2026-11-23T08:0{i}:00")
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", "--html", str(out), "--store", str(store)])
    assert res.exit_code == 0, res.output
    seen = outline(out.read_text())
    assert "sweep" in seen.headings and "history" in seen.headings and "history across stored runs" in seen.headings
    assert len(seen.images) == 2 and all(src.startswith("data:image/png;base64,iVBOR") for src in seen.images)
    assert any(h.startswith("timex-v4  timex[B=32,C=768,T=64]/fwd") for h in seen.headings)
    assert "CHANGE: slower" in "".join(seen.text)
    nothing = CliRunner().invoke(app, ["report", "--html", str(out), "--store", str(tmp_path / "none.db")])
    assert nothing.exit_code == 2 and "Nothing to report" in nothing.output


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (CI): the page's structure is tested above")
def test_the_page_opens_in_headless_chromium(tmp_path):
    """A real browser renders it from the file alone (no network), tables and images included."""
    from cudabench.results.records.model import IntegrityCheck

    sync_api = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("matplotlib")
    store = tmp_path / "s.db"
    with Store(store) as opened:
        for i, speed in enumerate((1.0, 1.3)):
            opened.append(timex_sweep(speed), Provenance(f"{i:x}" * 40, False), f"2026-11-23T08:0{i}:00")
    out = tmp_path / "report.html"
    assert CliRunner().invoke(app, ["report", "--html", str(out), "--store", str(store)]).exit_code == 0
    # the widest figures of a real attention sweep on the H100 (it scrolled at 821 px): milliseconds,
    # hundreds of MiB, the longest names, an INVALID row
    attention = {"B": 1, "H": 8, "N": 16384, "D": 128, "causal": 1}
    wide = tmp_path / "attention.html"
    flash = replace_integrity(measured("attention", attention, "attn-flash1", 1.827e-3, direction="fwdbwd",
                                       timing="events"), IntegrityCheck("distribution", "fail", "wrong on outliers"))
    sdpa = measured("attention", attention, "sdpa-efficient", 48.53e-3, role="baseline", direction="fwdbwd",
                    timing="events")
    wide.write_text(page(doc([dataclasses.replace(flash, peak_memory=33_600_000),
                              dataclasses.replace(sdpa, peak_memory=557_800_000)])))
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run"]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=flags)
        tab = browser.new_page(viewport={"width": 800, "height": 1000})
        requests, errors = [], []
        tab.on("request", lambda r: requests.append(r.url))
        tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        tab.goto(out.as_uri())
        assert tab.evaluate("document.documentElement.scrollWidth") <= 800  # readable at 800 px: no sideways scroll
        assert tab.locator("svg.bars").count() >= 1 and errors == []
        assert tab.title() == "cudabench: NVIDIA H100 80GB HBM3"
        widths = tab.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
        assert len(widths) == 2 and min(widths) > 100  # both plots decoded
        assert tab.locator("table").count() >= 3
        tab.goto(wide.as_uri())
        assert tab.evaluate("document.documentElement.scrollWidth") <= 800 and errors == []
        tab.goto(out.as_uri())
        keep = os.environ.get("CUDABENCH_SCREENSHOT")  # e.g. docs/benchmarks/report-800px.png
        tab.screenshot(path=keep or str(tmp_path / "page.png"), full_page=True)
        browser.close()
    assert all(url.startswith(("file:", "data:")) for url in requests)


def test_an_untrusted_subjects_figures_are_struck_through_on_the_page():
    import re
    from dataclasses import replace

    from cudabench.results.records.model import IntegrityCheck

    shape = {"B": 32, "C": 768, "T": 768}
    bad = replace(measured("timex", shape, "hostile-cached", 1.31e-6),
                  integrity=(IntegrityCheck("fresh-output", "fail", "stale"),))
    html = page(doc([measured("timex", shape, "timex-v4", 50.6e-6), bad]))
    rows = {name: row for row in re.findall(r"<tr>.*?</tr>", html) for name in ("timex-v4", "hostile-cached")
            if f">{name}<" in row}
    assert re.search(r"<td class='untrusted'>1.31 µs ±[0-9.]+%</td>", rows["hostile-cached"])
    assert "untrusted" not in rows["timex-v4"] and "50.6" in rows["timex-v4"]
    assert ".untrusted { color: #888; text-decoration: line-through; }" in html
    [chart] = re.findall(r"<svg.*?</svg>", html)
    assert ">timex-v4<" in chart and "hostile-cached" not in chart  # never drawn as a figure
    assert "fwd, not drawn: hostile-cached INVALID (fresh-output: stale)" in html


def bar_widths(chart):
    """{label: bar width} of one SVG bar chart."""
    import re

    return {label: float(width) for width, label in re.findall(r"<rect [^>]*width='([0-9.]+)'[^>]*><title>(.*?)</title>",
                                                               chart)}


def test_each_case_has_a_bar_chart_of_its_subjects_with_the_baseline_marked():
    import re

    shape = {"B": 32, "C": 768, "T": 768}
    html = page(doc([measured("timex", shape, "timex-v4", 50e-6), measured("timex", shape, "timex-v3", 100e-6),
                     measured("timex", shape, "conv1d", 200e-6, role="baseline"),
                     measured("timex", shape, "timex-v4", 120e-6, direction="fwdbwd")]))
    charts = re.findall(r"<svg.*?</svg>", html)
    assert len(charts) == 2  # one per direction of the case
    widths = bar_widths(charts[0])
    assert set(widths) == {"timex-v4", "timex-v3", "conv1d (baseline)"}
    assert widths["timex-v3"] / widths["timex-v4"] == pytest.approx(2, rel=1e-3)  # to scale
    assert widths["conv1d (baseline)"] / widths["timex-v4"] == pytest.approx(4, rel=1e-3)
    assert "fill='#9aa5b1'" in charts[0] and "<path d='M" in charts[0]  # baseline colour, interval whiskers
    assert list(bar_widths(charts[1])) == ["timex-v4"]


def test_a_page_without_plots_says_why():
    html = page(doc([measured("timex", {"B": 1, "C": 1, "T": 8}, "timex-v4", 1e-3)]),
                left_out=["No sweep plot: no shape parameter varies within a case of this run."])
    assert "<p class=why>No sweep plot: no shape parameter varies" in html


def test_the_table_fits_a_narrow_window_and_puts_reasons_under_it():
    import re

    from cudabench.results.records.model import IntegrityCheck

    shape = {"B": 32, "C": 768, "T": 768}
    reason = "stale: its outputs did not change with fresh inputs " * 3
    bad = replace_integrity(measured("timex", shape, "hostile-cached", 1e-6), IntegrityCheck("fresh-output", "fail", reason))
    html = page(doc([measured("timex", shape, "timex-v4", 50e-6), bad]))
    header = re.search(r"<tr><th.*?</tr>", html).group(0)
    assert header.count("<th") <= 9 and "note" not in header  # reasons are not a column
    assert "<th class='text'>subject</th>" in header and "<th class=''>n</th>" in header  # text left, numbers right
    assert f"<li>hostile-cached (fwd): fresh-output: {reason.strip()}" in html.replace(" </li>", "</li>")
    assert "white-space: nowrap" in html  # names and figures never break inside


def replace_integrity(result, check):
    from dataclasses import replace

    return replace(result, integrity=(check,))
