"""The subject process: where a subject's code runs. The judge process (cudabench.engine.worker)
starts it with `python -m cudabench.engine.subject_worker`, one per GPU, and asks it one request at
a time on stdin (cudabench.measure.blind says which). It holds the subject's op and inputs and never
anything that judges them. When its CUDA context is broken it says so and exits; the judge records
that against the subject it held and starts a fresh one. Its stdout carries only messages (see
protocol.py), as the judge's does."""

# torch and the blind runner are imported by the request that needs them, as in engine/worker.py.

from __future__ import annotations

import gc
import json
import os
import select
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from cudabench.engine.protocol import read_request
from cudabench.errors import CudabenchError, UncleanProcess
from cudabench.results.exporters.json_document import case_from_dict


class SubjectHandler:
    """Answers the judge's requests through a BlindRunner. `device="cpu"` serves tests."""

    def __init__(self, device: str = "cuda", timer_factory: Optional[Callable[[str], Any]] = None,
                 on_status: Callable[[str], None] = lambda s: None, modules: Optional[dict[str, Any]] = None,
                 freeze_startup: Optional[bool] = None) -> None:
        self.device = device
        self.freeze_startup = device == "cuda" if freeze_startup is None else freeze_startup
        self.timer_factory = timer_factory
        self.on_status = on_status
        self.modules = modules or {}  # tests: stand-in extensions by family name
        self.runner: Any = None
        self.companions: tuple[Any, ...] = ()  # the process's pipe reader and writer, watched with it

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        from cudabench.measure.subject import first_line

        op = request.get("op")
        try:
            if op == "hello":
                return self._hello(request)
            if self.runner is None:
                return {"type": "error", "message": "the subject process got a request before hello"}
            return {"type": op, **self._answer(op, request)}
        except CudabenchError as exc:  # the subject cannot run here (a constraint, a build): skipped
            return {"type": "error", "message": exc.message, "skip": op == "open", "healthy": self._healthy()}
        except UncleanProcess as exc:  # what came before the subject: the judge opens it in a fresh process
            return {"type": "error", "message": str(exc), "stale": op == "open", "healthy": False}
        except Exception as exc:  # noqa: BLE001 - a binding's TORCH_CHECK, a CUDA error, a spec's bug
            return {"type": "error", "message": first_line(exc) if isinstance(exc, (RuntimeError, ValueError,
                                                                                    TypeError, KeyError))
                    else f"{type(exc).__name__}: {first_line(exc)}", "healthy": self._healthy()}

    def _answer(self, op: Any, request: dict[str, Any]) -> dict[str, Any]:
        from cudabench.measure.settings import Settings

        r = self.runner
        if op == "build":
            build = read_request(request)
            return r.build(build.family, build.arch)
        if op == "open":
            return r.open(request["family"], case_from_dict(request["case"]), request["subject"], request["role"],
                          Settings(**request["settings"]), [(list(s), d) for s, d in request["outputs"]])
        if op in ("call", "forward"):
            return getattr(r, op)(bool(request.get("eager", False)))
        if op == "order":
            hold = request.get("hold")
            return r.order(None if hold is None else float(hold))
        if op in ("poison", "round", "samples", "peak", "hot", "finish"):
            return getattr(r, op)()
        raise ValueError(f"unknown request {op!r}")

    def _healthy(self) -> bool:
        from cudabench.engine.worker import healthy

        return healthy(self.device) and not (self.runner is not None and self.runner.upkeep.broken)

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        import torch

        from cudabench.engine.worker import prepare_process
        from cudabench.measure.blind import BlindRunner
        from cudabench.measure.timers import make_timer
        from cudabench.spec.registry import discover

        hello = read_request(request)
        registry = discover([Path(d) for d in hello.kernels_dirs])
        prepare_process(self.device, hello)
        if self.runner is not None:  # a warm worker's next run: the same runner, its state guard
            self.runner.registry = registry  # snapshot of the pristine process kept, reads the folders again
            self.runner.guard.objects.accept(self.runner, "registry")
            self.runner.watch_registry()
            self.runner.upkeep.settled = False  # spec.py ran, and the old registry's callbacks: collect at open
            self.runner.upkeep.take_threads()  # as a fresh process's hello takes them, spec.py's included
            return {"type": "ready", "pid": os.getpid()}
        if self.device == "cuda":
            from cudabench.engine.preload import warm_gpu

            warm_gpu(profiler=True)  # a spare's first GPU work (engine/preload.py); done already otherwise
            # autograd's device threads start at the first CUDA backward: now, so none is a subject's
            x = torch.ones(2, device="cuda", requires_grad=True)
            (x * 2).sum().backward()
            torch.cuda.synchronize()
            from cudabench.measure.process_hooks import refuse_audit_hooks

            refuse_audit_hooks()  # a subject process of its own (a test's process keeps its hooks)
            # torch.compile raises it to this at its first compile: an honest compiled baseline changes nothing
            sys.setrecursionlimit(max(sys.getrecursionlimit(), 2000))
        # the state guard's snapshot of the pristine process: after everything above
        self.runner = BlindRunner(registry, self.device, self.timer_factory or make_timer, on_status=self.on_status)
        self.runner.modules.update(self.modules)
        watched = self.runner.guard.objects
        watched.watch(self)
        for companion in self.companions:
            if companion is not None:
                watched.watch(companion, changing=("pending",))  # what a line read left over
        # Every open collects garbage (the last subject's mapped blocks are freed only then). A full
        # collection walks torch's whole heap: 80 ms a subject on the H200, 4 s of a 45-subject sweep.
        # What exists now is the harness's start-up, never garbage: set aside, a collection walks
        # only what came later (the subjects' objects among it). Not in a test's own process (CPU).
        if self.freeze_startup:
            gc.collect()
            gc.freeze()
        return {"type": "ready", "pid": os.getpid()}


# How long the subject process polls for the judge's next request before it sleeps in read(). Between
# judged calls it stays awake, as it is in the hot loop (where the synchronize spins): a thread woken
# from read() pays its first launches again (seen: tens of µs on a 100 µs call, under sync).
SPIN_SECONDS = 0.02


class SpinningLines:
    """The request lines of a pipe, each waited for by polling for up to SPIN_SECONDS, then in select."""

    def __init__(self, fd: int = 0, spin: float = SPIN_SECONDS) -> None:
        self.fd, self.spin, self.pending = fd, spin, b""
        os.set_blocking(fd, False)

    def __iter__(self) -> "SpinningLines":
        return self

    def __next__(self) -> str:
        while b"\n" not in self.pending:
            chunk = self._read()
            if not chunk:  # the judge closed the pipe
                if not self.pending:
                    raise StopIteration
                line, self.pending = self.pending, b""
                return line.decode()
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode() + "\n"

    def _read(self) -> bytes:
        give_up = time.perf_counter() + self.spin
        while True:
            try:
                return os.read(self.fd, 1 << 16)
            except BlockingIOError:
                if time.perf_counter() > give_up:
                    select.select([self.fd], [], [])


def main() -> None:
    from cudabench.engine.channel import Channel, serve
    from cudabench.engine.sealed import seal
    from cudabench.engine.preload import preload

    seal()  # before any subject's code: no other process of the user writes into this one's pipes
    # torch.compile compiles here, not in a pool of worker processes: a process the subject process
    # starts while a subject is timed is taken for the subject's own (cudabench.measure.processes)
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"

    channel = Channel()
    handler = SubjectHandler(on_status=lambda text: channel.send({"type": "status", "text": text}))
    requests = SpinningLines(sys.stdin.fileno())
    # what reads the requests and writes the replies, down to the file, json's coders included
    buffer = getattr(channel.stream, "buffer", None)
    handler.companions = (channel, channel.stream, buffer, getattr(buffer, "raw", None), requests,
                          json._default_encoder, json._default_decoder)
    try:
        preload(profiler=True, gpu="--spare" not in sys.argv[1:])  # a spare: no GPU work while it waits
        serve(channel, handler, requests)
    except KeyboardInterrupt:
        pass
    finally:
        sys.stderr.flush()
        channel.stream.flush()
        os._exit(0)  # skip interpreter teardown: with a broken CUDA context it can hang or crash


if __name__ == "__main__":
    # run through the module's own name, not as __main__: the state guard walks the cudabench.*
    # modules, so a subject that patched this process's classes would otherwise go unseen
    from cudabench.engine.subject_worker import main as module_main

    module_main()
