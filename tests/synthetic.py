"""Synthetic results documents for the compare, plot and export tests: real `cudabench.results.records.model`
records through `cudabench.results.exporters.json_document.document()`, with samples drawn around a chosen median."""

import numpy as np

from cudabench.results.exporters.json_document import document
from cudabench.results.records.model import Case, Check, Environment, Measurement, Result
from cudabench.results.records.stats import summarize

ENV = Environment(gpu="NVIDIA H100 80GB HBM3", capability="9.0", sm_count=132, driver="550.54.15",
                  cuda_runtime="12.4", torch="2.4.0", cudabench="0.1.0", date="2024-06-01T12:00:00+00:00")


def measured(family, shape, subject, median, role="variant", direction="fwd", n=200, spread=0.01, seed=0,
             timing="sync"):
    """A result whose samples scatter around `median` seconds with relative spread `spread`."""
    rng = np.random.default_rng(seed)
    samples = tuple(float(v) for v in median * (1 + spread * rng.standard_normal(n)))
    m = Measurement(samples=samples, timing=timing, warmup_calls=3, warmup_seconds=0.1, stop_reason="test")
    return Result(Case(family, tuple(shape.items()), direction), subject, role,
                  check=Check((("out", 2e-7),), 1e-5), measurement=m, stats=summarize(samples),
                  flops=1e9, bytes=1e6)


def skipped(family, shape, subject, why="constraint: T must be a multiple of 4", direction="fwd"):
    return Result(Case(family, tuple(shape.items()), direction), subject, "variant", skipped=why)


def doc(results, command="cudabench run --config configs/timex-sweep.toml", env=ENV):
    return document(results, env, command, seed=7, source_hashes={"timex": "ab" * 32})


def timex_sweep(speed=1.0):
    """timex-v3, timex-v4 and conv1d along T at B=32 and along B at T=768, as the shipped sweep."""
    results = []
    shapes = [{"B": 32, "C": 768, "T": t} for t in (64, 128, 256, 512, 1024)]
    shapes += [{"B": b, "C": 768, "T": 768} for b in (8, 16, 32, 64)]
    for i, s in enumerate(shapes):
        work = s["B"] * s["T"] * 1e-8
        results += [measured("timex", s, "timex-v3", 3 * work * speed, seed=3 * i),
                    measured("timex", s, "timex-v4", 2 * work * speed, seed=3 * i + 1),
                    measured("timex", s, "conv1d", 9 * work, role="baseline", seed=3 * i + 2)]
    return doc(results)
