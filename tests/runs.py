"""Runners for tests: in this process through a worker Handler (CPU tests of the run logic, with a
fake timer), or in real worker processes (GPU tests, as `cudabench run` does); and a judge whose subject
process is this one (CPU tests of the judge, with stand-in extensions and timers)."""

from cudabench.engine.scheduler import Runner
from cudabench.engine.subject_link import SubjectLink
from cudabench.engine.subject_worker import SubjectHandler
from cudabench.engine.worker import Handler
from cudabench.engine.workers import InlineWorker, ProcessWorker, worker_command


def inline_runner(options, timer_factory=None, device="cpu", **kw):
    handler = Handler(device=device, timer_factory=timer_factory)
    return Runner(options, lambda gpu: InlineWorker(handler), **kw)


def process_runner(options, kernels_dirs=(), **kw):
    return Runner(options, lambda gpu: ProcessWorker(worker_command()), kernels_dirs, **kw)


def run_in_workers(options, tasks, kernels_dirs=()):
    with process_runner(options, kernels_dirs) as runner:
        return runner.run(tasks)


def inline_judge(registry, kernels_dir, modules, timer_factory):
    """A Judge whose subject runs in this process: `modules` stand in for the built extensions."""
    from cudabench.measure.judge import Judge

    handler = SubjectHandler("cpu", timer_factory=timer_factory, modules=modules)
    link = SubjectLink(lambda: InlineWorker(handler), {"op": "hello", "kernels_dirs": [str(kernels_dir)]})
    return Judge(registry, link, device="cpu")
