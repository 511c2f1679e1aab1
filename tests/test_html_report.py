"""`cudabench report --html`: one self-contained page (no script, nothing fetched), the run's tables,
its plots inside the page, the history section, and every name shown as written."""

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
    sync_api = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("matplotlib")
    store = tmp_path / "s.db"
    with Store(store) as opened:
        for i, speed in enumerate((1.0, 1.3)):
            opened.append(timex_sweep(speed), Provenance(f"{i:x}" * 40, False), f"2026-11-23T08:0{i}:00")
    out = tmp_path / "report.html"
    assert CliRunner().invoke(app, ["report", "--html", str(out), "--store", str(store)]).exit_code == 0
    flags = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run"]
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=flags)
        tab = browser.new_page()
        requests = []
        tab.on("request", lambda r: requests.append(r.url))
        tab.goto(out.as_uri())
        assert tab.title() == "cudabench: NVIDIA H100 80GB HBM3"
        widths = tab.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
        assert len(widths) == 2 and min(widths) > 100  # both plots decoded
        assert tab.locator("table").count() >= 3
        tab.screenshot(path=str(tmp_path / "page.png"), full_page=True)
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
    assert "<td class='untrusted'>1.31 µs</td>" in rows["hostile-cached"]
    assert "untrusted" not in rows["timex-v4"] and "50.6" in rows["timex-v4"]
    assert ".untrusted { color: #888; text-decoration: line-through; }" in html
