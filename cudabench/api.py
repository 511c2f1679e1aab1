"""cudabench from Python: `bench` times an op of your own package, named by import path, in the same
isolated workers as `cudabench run` (the op never runs in the caller's process), with the same check
against an fp64 reference, integrity checks, timers and result records.

    import cudabench
    res = cudabench.bench("mypkg.ops:fused_add", inputs="mypkg.bench:make_inputs",
                          reference="mypkg.bench:reference", shapes=[{"n": 1 << 20}, {"n": 1 << 24}],
                          baselines=["torch.add"])
    res.table(); res.to_json("out.json"); res.assert_correct()

Outside a GPU machine it raises cudabench.NoGPUError; any other mistake (a path that does not import,
a bad shape) is a cudabench.CudabenchError with one paragraph that says what to do."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

from rich.console import Console

from cudabench.device import require_gpu
from cudabench.engine.plan import plan
from cudabench.engine.request import checked, effective_timing, run_options
from cudabench.engine.scheduler import Runner
from cudabench.engine.sealed import sealed_while
from cudabench.engine.start import start_runner
from cudabench.engine.suite_file import TimingPolicy
from cudabench.results.compare.render import describe
from cudabench.results.compare.verdicts import compare_documents, parse_threshold
from cudabench.results.exporters.json_document import (check_document, document, json_safe, source_hash,
                                                       write_json_atomic)
from cudabench.results.records.codec import from_data
from cudabench.results.records.model import Environment, Result
from cudabench.results.report import terminal
from cudabench.results.store.database import load_run
from cudabench.spec.op_family import op_spec, write_family
from cudabench.spec.registry import discover

THRESHOLD = "5%"


class ResultsError(AssertionError):
    """An assertion on results failed: which subjects, and why."""


@dataclass
class Results:
    """The records of one bench: the same Result records a results file holds."""
    results: tuple[Result, ...]
    environment: Environment
    seed: int = 0
    command: str = ""
    source_hashes: dict[str, str] = field(default_factory=dict)
    store: Optional[Path] = None   # where assert_not_slower_than finds stored runs (default: the default store)

    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def document(self) -> dict[str, Any]:
        """The results document, as `cudabench run --json` writes it."""
        return document(self.results, self.environment, self.command, self.seed, self.source_hashes)

    def to_json(self, path: Path | str) -> Path:
        write_json_atomic(path, self.document())
        return Path(path)

    def table(self, wide: bool = False, console: Any = None) -> None:
        """Print the tables `cudabench run` prints (every figure with `wide`)."""
        console = console or Console()
        for table in terminal.tables(self.results, wide):
            console.print(table)
        for line in terminal.notes(self.results):
            console.print(line, style="dim", markup=False, highlight=False)

    def assert_correct(self) -> None:
        """Every subject ran, matched the fp64 reference and passed every integrity check."""
        bad = [f"{r.subject} {r.case.key}: {r.status} ({r.error or r.skipped or r.invalid_because or 'wrong result'})"
               for r in self.results if r.status not in ("ok",) and not r.skipped.startswith(("constraint", "dtype"))]
        if bad:
            raise ResultsError("not correct: " + "; ".join(bad))

    def assert_not_slower_than(self, previous: Any, threshold: str | float = THRESHOLD) -> None:
        """No subject measured slower than in `previous` (a results file, a results document, another
        Results, or a stored run such as "@latest" or "main" of the default store) beyond `threshold`,
        by compare's noise-aware verdict."""
        old = _document_of(previous, self.store)
        limit = parse_threshold(threshold) if isinstance(threshold, str) else float(threshold)
        comparison = compare_documents(old, _normalised(self.document()), limit, allow_missing=True)
        if comparison.regressions or comparison.failed:
            raise ResultsError("slower than before: " + "; ".join(comparison.problems) +
                               (" | " + "; ".join(describe(comparison.failed)) if comparison.failed else ""))


def _normalised(doc: dict[str, Any]) -> dict[str, Any]:
    """A document as a file's reader gets it (checked, NaN strings read back)."""
    return check_document(json_safe(doc), "these results")


def _document_of(previous: Any, store: Optional[Path] = None) -> dict[str, Any]:
    if isinstance(previous, Results):
        return _normalised(previous.document())
    if isinstance(previous, Mapping):
        return _normalised(dict(previous))
    text = str(previous)
    return load_run(text if Path(text).is_file() or text.startswith("@") else f"@{text}", store)[0]


def bench(op: Any, *, inputs: Any, reference: Any, shapes: Sequence[Mapping[str, int]],
          baselines: Sequence[Any] = (), dtypes: Sequence[str] = ("float32",), grad_inputs: Sequence[str] = (),
          directions: Optional[Sequence[str]] = None, tolerance: float = 1e-5, timing: str = "sync",
          max_time: Optional[float] = None, repeat: Optional[int] = None, seed: Optional[int] = None, fuzz: int = 0,
          integrity: bool = True, warm: Optional[bool] = None,
          start_worker: Optional[Callable[[Any], Any]] = None) -> Results:
    """Check and time `op` at each of `shapes` (and each baseline beside it) in isolated workers.

    op, inputs, reference, baselines: import paths ("package.module:name", "torch.add") or module-level
    functions (found again by their module and name): op(*inputs) is timed; inputs(shape, generator,
    device) makes the inputs; reference(*inputs) is the math, run on float64 copies. grad_inputs names
    the inputs that get gradients (then bwd and fwdbwd are timed too). `start_worker` replaces the
    worker a GPU gets (tests)."""
    spec = op_spec(op, inputs, reference, shapes, baselines, dtypes, grad_inputs, tolerance)
    policy = effective_timing(checked(TimingPolicy(timing=timing, max_time=max_time, repeat=repeat), lambda key: key))
    kernels = write_family(spec)
    registry = discover([kernels])
    options = run_options(policy, directions=tuple(directions) if directions else None, seed=seed,
                          dtypes=tuple(spec.dtypes), fuzz=fuzz, integrity=integrity)
    tasks = [t for shape in spec.shapes for t in plan(registry, [spec.name], dict(shape), options)]
    if start_worker is None:
        require_gpu()
    started = time.time()
    settings = {"timing": timing, "op": spec.op}
    runner = (start_runner(options, [kernels], settings, warm=warm) if start_worker is None
              else Runner(options, start_worker, [kernels], settings))
    with sealed_while(), runner:  # no subject's code may write into this process's pipes (docs/trust.md)
        runner.start()
        environment = from_data(Environment, runner.environment)
        runner.run(tasks)
    hashes = {t.family.name: source_hash(t.family) for t in tasks}
    return Results(tuple(runner.results), environment, runner.seed, f"cudabench.bench({spec.op!r}) at {started:.0f}",
                   hashes)
