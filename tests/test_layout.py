"""The package's layout reads as its pipeline: no cycle between its subpackages (cli, engine, measure,
spec, profile, results and the top-level modules), nor between the concerns inside results (records,
exporters, store, compare, report, plots), counting imports inside functions too; no module much over
300 lines."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cudabench"
MAX_LINES = 345  # "about 300"
STILL_LONG: dict[str, int] = {}  # modules still over MAX_LINES, each held at its length


def part_of(module: str, depth: int = 1) -> str:
    """cudabench.results.report.terminal -> results (depth 2: results.report); cudabench.files -> files."""
    parts = module.split(".")
    return ".".join(parts[1:1 + depth]) if len(parts) > 1 else module


def edges(inside: str = "", depth: int = 1) -> dict[str, set[str]]:
    """Imports between the parts of the package (of `inside`, one level further down, when given)."""
    graph: dict[str, set[str]] = {}
    for path in (PACKAGE / inside).rglob("*.py"):
        here = part_of(".".join(("cudabench", *path.relative_to(PACKAGE).with_suffix("").parts)), depth)
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cudabench."):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "cudabench":
                names = [f"cudabench.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("cudabench.")]
            for name in names[:1]:  # the module itself; its imported names are members of it
                there = part_of(name, depth)
                if there != here and (not inside or there.startswith(inside + ".")):
                    graph.setdefault(here, set()).add(there)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found = []

    def walk(node, path):
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                found.append(path + [nxt])
            elif nxt not in path and nxt > path[0]:
                walk(nxt, path + [nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def test_no_cycle_between_the_subpackages():
    graph = edges()
    assert "results" in graph and "spec" in graph  # the graph was read
    assert cycles(graph) == []


def test_no_cycle_between_the_concerns_of_results():
    graph = edges("results", depth=2)
    assert "results.report" in graph and "results.store" in graph  # the graph was read
    assert cycles(graph) == []


def test_a_planted_cycle_is_found():
    assert cycles({"results.compare": {"results.report"}, "results.report": {"results.compare"}}) != []



def test_no_module_is_much_over_300_lines():
    lengths = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert {m: n for m, n in lengths.items() if n > STILL_LONG.get(m, MAX_LINES)} == {}


def test_every_subpackage_is_in_the_distribution():
    """pyproject.toml lists the packages: a subpackage left out works in a checkout and is missing
    from an installed cudabench."""
    import tomllib

    listed = set(tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(("cudabench", *p.parent.relative_to(PACKAGE).parts)) for p in PACKAGE.rglob("__init__.py")}
    assert found - listed == set()
