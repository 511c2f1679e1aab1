"""The package's layout reads as its pipeline: no cycle between its subpackages (cli, engine, measure,
spec, profile, results and the top-level modules), counting imports inside functions too."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cudabench"


def part_of(module: str) -> str:
    """cudabench.results.report -> results; cudabench.files -> files."""
    return module.split(".")[1] if module.count(".") else module


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        here = part_of(".".join(("cudabench", *path.relative_to(PACKAGE).with_suffix("").parts)))
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cudabench."):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module == "cudabench":
                names = [f"cudabench.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("cudabench.")]
            for name in names[:1]:  # the module itself; its imported names are members of it
                there = part_of(name)
                if there != here:
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
