"""From a suite file to the tasks a run executes: the planned cases of every [[case]] (its timing
policy is resolved with the command line's in cudabench.engine.request)."""

from __future__ import annotations

from dataclasses import replace

from cudabench.errors import ConfigError, UnknownKernelError
from cudabench.engine.suite_file import Suite
from cudabench.spec.registry import Registry
from cudabench.engine.plan import RunOptions, Task, plan

MAX_SUBJECTS = 100_000  # subject runs a suite may plan: a day of GPU time at a second each

def plan_suite(registry: Registry, suite: Suite, options: RunOptions) -> list[Task]:
    """Every shape of every case. A case's directions and baselines replace the command line's
    defaults (not what the command line names explicitly); a variant that cannot run at one shape
    of a sweep is recorded as skipped rather than stopping the suite."""
    tasks: list[Task] = []
    planned = 0
    for case in suite.cases:
        case_options = replace(
            options,
            directions=options.directions if options.directions is not None else case.directions,
            baselines=options.baselines if options.baselines is not None else case.baselines,
            dtypes=options.dtypes if options.dtypes is not None else case.dtypes,
        )
        for shape in case.shapes:
            try:
                tasks += plan(registry, case.kernels, dict(shape), case_options, strict=False)
            except UnknownKernelError as exc:
                raise UnknownKernelError(f"{suite.path}, case {suite.cases.index(case) + 1}: {exc.message}",
                                         exc.hint) from None
            planned += sum(len(t.cases) * (len(t.variants) + len(t.baselines)) for t in tasks[-1:])
            if planned > MAX_SUBJECTS:
                raise ConfigError(f"{suite.path}: the suite plans more than {MAX_SUBJECTS:,} subject runs (kernel or "
                                  f"baseline × shape × precision × direction); it got there at case "
                                  f"{suite.cases.index(case) + 1} of {len(suite.cases)}.",
                                  "Split it into several suites, or sweep fewer shapes, precisions or kernels.")
    return tasks
