"""One compute-sanitizer case, in this one process: every variant that KERNEL names (a family or a
variant), at SHAPE, in each direction and precision, called once and checked against the fp64
reference. `.ci/sanitize` runs it under the tool: `cudabench check` judges in a second process and
runs the subject in a third (CUDA IPC between them), and under memcheck at 4325110 it gave no output
for 240 s, where one process with one context is what the sanitizer is for.

    python3 .ci/sanitize_case.py timex-fft B=3,C=2,T=1025 [--dtype bfloat16,float16]
"""

import argparse
import sys

from cudabench.engine.plan import RunOptions, plan, skips, subjects
from cudabench.errors import CudabenchError
from cudabench.measure.subject import Bench
from cudabench.spec.registry import discover
from cudabench.spec.shapes import parse_shape

parser = argparse.ArgumentParser()
parser.add_argument("kernel")
parser.add_argument("shape")
parser.add_argument("--dtype", default="float32")
args = parser.parse_args()

registry = discover()
bench = Bench(registry)
options = RunOptions(baselines=(), dtypes=tuple(args.dtype.split(",")), time=False)
failed = 0
try:
    tasks = plan(registry, [args.kernel], parse_shape(args.shape), options, strict=False)
except CudabenchError as exc:  # an unknown kernel, a bad shape: the case's own mistake, in one line
    sys.exit(f"error: {exc.message}")
for task in tasks:
    for case in task.cases:  # the planner's cases: the shape completed, constraints and precisions applied
        for name, _, reason in skips(task, case):
            print(f"skip {name} {case.key}: {reason}")
        for subject in subjects(task, case):
            try:
                _, check = bench.checked_call(task.family, case, subject.name, subject.role, seed=1)
                print(f"pass {subject.name} {case.key}: error {check.worst:.2e}", flush=True)
            except Exception as exc:  # noqa: BLE001 - reported, counted, and the next case still runs
                failed += 1
                print(f"FAIL {subject.name} {case.key}: {exc}", flush=True)
sys.exit(1 if failed else 0)
