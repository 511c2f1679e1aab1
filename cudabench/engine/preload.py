"""What a worker process does before its first request, so that the request finds it ready: torch and
the measuring code imported, and (unless it is a spare subject process) its CUDA context made.

A spare subject process (engine/subject_link.py) waits beside the run of another subject process on the
same GPU, so it does no GPU work while it waits: it imports, and makes a first backward on the CPU (torch
imports torch.fx and sympy at the first backward given its upstream gradient: 3 s on the H100 machine).
Its CUDA context, first CUDA backward and first CUPTI session come with its hello, which the judge sends
when it takes over at the end of a run, with no subject timed on the GPU."""

from __future__ import annotations

_gpu_ready = False  # warm_gpu done in this process


def preload(profiler: bool = False, gpu: bool = True) -> None:
    """Import torch and the measuring code; with `gpu`, warm_gpu too. A failure here is left for the
    hello to report (it does the same steps)."""
    try:
        import importlib

        import torch

        for name in ("cudabench.measure.blind", "cudabench.measure.judge"):
            importlib.import_module(name)
        prime_statistics()
        from cudabench.measure.threads import start_cpu_pool

        start_cpu_pool()
        if gpu and torch.cuda.is_available():
            warm_gpu(profiler)
        else:
            x = torch.zeros(2, requires_grad=True)
            torch.autograd.grad(x * 2, [x], torch.ones_like(x))
    except Exception:  # noqa: BLE001 - reported by the hello
        pass


def warm_gpu(profiler: bool = False) -> None:
    """The CUDA context and a first backward given its upstream gradient (a run's first fwdbwd subject
    or reference paid its imports as "check" time); with `profiler` (a subject process) its first CUPTI
    session, which costs several times a later one. Once per process."""
    global _gpu_ready
    if _gpu_ready:
        return
    import torch

    from cudabench.device import gpu_identity
    from cudabench.measure.threads import start_backward_pool

    x = torch.zeros(2, device="cuda", requires_grad=True)
    torch.autograd.grad(x * 2, [x], torch.ones_like(x))
    start_backward_pool()
    gpu_identity()  # kept for the process (the clock monitor reads it): before the state guard's snapshot
    if profiler:
        try:
            from cudabench.measure.cupti_activity import cupti_session

            with cupti_session():
                (x * 2).sum().item()
        except Exception:  # noqa: BLE001 - the CUPTI pass reports a profiler that does not work here
            pass
        try:
            prime_timing()
        except Exception:  # noqa: BLE001 - a subject's own hot loop reports what fails here
            pass
    _gpu_ready = True


def prime_statistics() -> None:
    """The first summary of samples in a process pays numpy's first quantiles: in a subject process that
    was the first subject's stop rule deciding, counted as its sampling."""
    from cudabench.results.records.stats import summarize

    summarize([1.0, 2.0, 3.0, 4.0] * 8)


def prime_timing() -> None:
    """A short timed loop of a harness kernel under the clock monitor, as a subject's hot loop makes it:
    the monitor's thread and NVML readings, the events timer and the stop rule's first summary. Without
    it a run's first subject sampled 45-70 ms longer than its stop rule asks (0.15-0.2 s against 0.1 s
    on two H200 hosts, 2026-11-28: `.ci/sessions/probe31_first_subject.py`)."""
    import torch

    from cudabench.measure.clocks import ClockMonitor
    from cudabench.measure.loop import Warmup, measure
    from cudabench.measure.stop import Adaptive
    from cudabench.measure.timers import EventTimer

    with ClockMonitor() as clocks:
        measure(lambda: torch.cuda._sleep(1000), EventTimer(), Adaptive(min_time=0.005), Warmup(1, 0.0),
                torch.cuda.synchronize, None, "hot", clocks.mark)
