"""cudabench in a pytest suite (active wherever cudabench is installed, through its pytest11 entry
point): the `cudabench` fixture benches an op the way `cudabench.bench` does, skips the test where no
GPU is usable (saying why in the report), and the terminal summary lists every figure measured.

    def test_fused_add_speed(cudabench):
        r = cudabench.bench("mypkg.ops:fused_add", inputs="mypkg.bench:make_inputs",
                            reference="mypkg.bench:reference", shapes=[{"n": 1 << 24}])
        r.assert_correct()
        r.assert_not_slower_than("main", threshold="5%")   # the results store's run at main, or a file

`--cudabench-json DIR` also keeps each test's results file (named by the test) in DIR;
`--cudabench-store PATH` names the results store whose runs ("main", "@latest") the tests compare with;
`--cudabench-save` appends each bench to it after its test (with the git commit)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

SUMMARY_KEY = pytest.StashKey[list]()


class BenchFixture:
    """What a test gets as `cudabench`: bench() and the results it measured."""

    def __init__(self, node: Any, summary: list, keep: Optional[Path], store: Optional[Path] = None) -> None:
        self.node, self.summary, self.keep, self.store = node, summary, keep, store
        self.start_worker: Optional[Callable[[Any], Any]] = None  # a stand-in worker (tests of this plugin)
        self.measured: list = []

    def save_to_store(self) -> None:
        """After the test (so its own comparisons never see its own run): each bench appended to the
        results store as a run of its own, with this work tree's commit."""
        from cudabench.results.store.access import default_path
        from cudabench.results.store.database import append_run

        for results in self.measured:
            append_run(self.store or default_path(), results.document())

    def bench(self, op: Any, **options: Any) -> Any:
        from cudabench.api import bench
        from cudabench.errors import NoGPUError

        try:
            results = bench(op, start_worker=self.start_worker, **options)
        except NoGPUError as exc:
            pytest.skip(f"cudabench: {exc.message}")
        results.store = self.store
        self.summary.extend((self.node.nodeid, r) for r in results)
        self.measured.append(results)
        if self.keep is not None:
            self.keep.mkdir(parents=True, exist_ok=True)
            results.to_json(self.keep / (re.sub(r"[^A-Za-z0-9_.-]+", "_", self.node.nodeid)[-150:] + ".json"))
        return results


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("cudabench")
    group.addoption("--cudabench-json", metavar="DIR", default=None,
                    help="Keep each cudabench fixture's results file (as `cudabench run --json` writes it) in DIR.")
    group.addoption("--cudabench-store", metavar="PATH", default=None,
                    help="The results store whose runs assert_not_slower_than('main') names (default: "
                         "$CUDABENCH_STORE or .cudabench/results.db).")
    group.addoption("--cudabench-save", action="store_true", default=False,
                    help="Append each bench to that store after its test (with the git commit), for `cudabench "
                         "history` and later comparisons; compare with a commit (\"main\"), not \"@latest\".")


def pytest_configure(config: Any) -> None:
    config.stash[SUMMARY_KEY] = []


@pytest.fixture
def cudabench(request: Any) -> Iterator[BenchFixture]:
    """Bench an op in cudabench's isolated workers: `cudabench.bench(op, inputs=..., reference=...,
    shapes=[...])` (see cudabench.api.bench); skips the test where no GPU is usable."""
    keep, store = request.config.getoption("--cudabench-json"), request.config.getoption("--cudabench-store")
    fixture = BenchFixture(request.node, request.config.stash[SUMMARY_KEY], Path(keep) if keep else None,
                           Path(store) if store else None)
    yield fixture
    if request.config.getoption("--cudabench-save"):
        fixture.save_to_store()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    from cudabench.results.compare.render import median_text

    measured = config.stash.get(SUMMARY_KEY, [])
    if not measured:
        return
    terminalreporter.section("cudabench")
    for nodeid, r in measured:
        figure = median_text(r.stats.median, r.stats.precision) if r.trusted else "-"
        terminalreporter.write_line(f"{nodeid}: {r.subject} {r.case.key} {r.status} {figure}"
                                    + (f" on {r.gpu}" if r.gpu else ""))
