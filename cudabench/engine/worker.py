"""The worker process: the judge of one GPU. The parent (cudabench run, check, compare-sync-modes,
profile) starts it with `python -m cudabench.engine.worker`, sends requests on stdin and reads
messages (see protocol.py). For `run` and `check` it judges each subject (cudabench.measure.judge)
while the subject's code runs in a subject process of its own (cudabench.engine.subject_worker),
replaced whenever it crashes or hangs; this process never loads a kernel under test for them. One
worker serves one GPU and many subjects: builds and CUDA start-up are paid once.

compare-sync-modes and profile are lessons, not judged measurements: they check and time one
subject in this process (Bench.checked_call). After a CUDA error there it probes its context; when
the context is broken it says so and exits, and the parent starts a fresh one.

Its own stdout is kept for messages: file descriptor 1 is pointed at stderr, so a kernel's printf
or a library's chatter cannot garble the protocol."""

# torch and the measurement code are imported by the request that needs them (engine/preload.py imports
# them ahead in a warm worker): a worker that cannot serve here answers its hello at once.

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from cudabench import nvtx
from cudabench.engine.channel import Channel, serve
from cudabench.engine import sealed
from cudabench.engine.protocol import (Build, Hello, Profile, SubjectRequest, SyncModes, Transfer,
                                       read_request)
from cudabench.engine.protocol import request as protocol_request
from cudabench.errors import CudabenchError
from cudabench.results.exporters.json_document import result_to_dict
from cudabench.results.records.model import Case


class Handler:
    """Answers one request at a time. `device="cpu"` and `timer_factory` serve tests: the subject then
    runs in this process (no isolation), through the same judge and the same requests."""

    def __init__(self, device: str = "cuda", timer_factory: Optional[Callable[[str], Any]] = None,
                 on_status: Callable[[str], None] = lambda s: None, eager_subject: bool = True,
                 spare: bool = False) -> None:
        self.device = device
        self.timer_factory = timer_factory
        self.on_status = on_status
        self.eager_subject = eager_subject
        self.spare = spare  # it serves several runs (warm, a Dask lane): a spare subject process from the start
        self.bench: Any = None
        self.judge: Any = None
        self.link: Any = None
        # rebound, never changed in place: a warm worker's acceptor thread reads it while a run goes on
        self.families: frozenset[str] = frozenset()
        self.served = False  # the subject process has served a request since it took over
        self.where: dict[str, Any] = {"host": socket.gethostname(), "gpu": "", "gpu_index": -1, "gpu_uuid": ""}

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request as it came (plain data): read into its record (protocol.py), then answered."""
        try:
            request = read_request(message)
        except (ValueError, TypeError, KeyError) as exc:
            return {"type": "error", "message": f"an unreadable request: {exc}"}
        return self.answer(request)

    def answer(self, request: Any) -> dict[str, Any]:
        try:
            if isinstance(request, Hello):
                return self._hello(request)
            if self.bench is None:
                return {"type": "error", "message": "the worker got a request before hello"}
            self.served = True
            answers = {Build: self._build, SubjectRequest: self._subject, SyncModes: self._sync_modes,
                       Profile: self._profile, Transfer: self._transfer}
            if type(request) in answers:
                return answers[type(request)](request)
        except CudabenchError as exc:
            return {"type": "error", "message": exc.message, "hint": exc.hint, "exit_code": exc.exit_code,
                    "healthy": self._healthy()}
        except (RuntimeError, ValueError, TypeError, KeyError) as exc:
            from cudabench.measure.subject import first_line

            return {"type": "error", "message": first_line(exc), "healthy": self._healthy()}
        except Exception as exc:  # noqa: BLE001 - anything else (a spec's AttributeError, a bug here)
            # is reported with its type, never left to end the worker without a word
            import traceback

            from cudabench.measure.subject import first_line

            traceback.print_exc(file=sys.stderr)
            return {"type": "error", "message": f"{type(exc).__name__}: {first_line(exc)}",
                    "healthy": self._healthy()}
        return {"type": "error", "message": f"a worker does not answer {type(request).__name__} here"}

    def _healthy(self) -> bool:
        return healthy(self.device)

    # ---- requests --------------------------------------------------------------------------------

    def _hello(self, request: Hello) -> dict[str, Any]:
        from cudabench.device import environment
        from cudabench.measure.judge import Judge
        from cudabench.measure.subject import Bench
        from cudabench.spec.registry import discover

        registry = discover([Path(d) for d in request.kernels_dirs])
        if self.link is None:
            self.link = self._subject_link(request)
        else:  # a later run (a warm worker's, a Dask worker's): its own subject process, greeted anew
            if self.served:
                self.renew_subject_process()
            self.link.rehello(self._subject_hello(request))
        prepare_process(self.device, request)
        env = environment(dict(request.settings))
        self.where.update(gpu=env.gpu, gpu_index=env.gpu_index, gpu_uuid=env.gpu_uuid)
        ceilings = None
        if request.ceilings and self.device == "cuda":
            from cudabench.measure import ceilings as device_ceilings

            self.on_status("this GPU's ceilings (measured once, then cached)")
            ceilings = device_ceilings.get()
        self.bench = Bench(registry, self.device)
        self.judge = Judge(registry, self.link, self.device, ceilings, on_status=lambda text: self.on_status(text))
        return {"type": "ready", "pid": os.getpid(), "environment": _plain(env),
                "ceilings": dataclasses.asdict(ceilings) if ceilings else None}

    def _subject_link(self, request: Hello) -> Any:
        """The subject process: a real one on a GPU, started now so that its start overlaps this
        one's; in this process for the CPU tests."""
        from cudabench.engine.subject_link import SubjectLink
        from cudabench.engine.subject_worker import SubjectHandler
        from cudabench.engine.workers import InlineWorker

        hello = self._subject_hello(request)
        if self.device != "cuda":
            inline = SubjectHandler(self.device, self.timer_factory)
            return SubjectLink(lambda: InlineWorker(inline), hello)
        from cudabench.measure.processes import become_subreaper

        become_subreaper()  # a process a subject starts and orphans stays below this one, in sight
        link = SubjectLink.process(hello, lambda text: self.on_status(text))
        if self.eager_subject:
            link.launch()
        if self.spare:
            link.keep_spare()
        return link

    @staticmethod
    def _subject_hello(request: Hello) -> dict[str, Any]:
        """What the subject process is told: where the families are and the NVTX settings, nothing
        of the run's (no ceilings, no settings)."""
        return protocol_request(Hello(request.kernels_dirs, ceilings=False, nvtx=request.nvtx,
                                      nvtx_iterations=request.nvtx_iterations))

    def renew_subject_process(self) -> None:
        """After a run (warm workers): the subject process is replaced by one no subject has run in (the
        link's spare, started a run ago, so that a run straight after this one finds it ready). Each
        run's subjects then run in a process no earlier run's subject ran in: the state guard restores
        and checks what the harness depends on, but not every library function a subject could patch
        for a later one (a baseline's conv1d, say)."""
        if self.link is not None:
            self.link.renew()
            self.families, self.served = frozenset(), False

    def loaded_families(self) -> list[str]:
        return sorted(self.families)

    def _build(self, request: Build) -> dict[str, Any]:
        """Built and loaded in the subject process: this one never loads a kernel under test."""
        from cudabench.measure.judge import SubjectLost

        family = self.bench.registry.family(request.family)
        self.link.take_waited()  # an earlier wait (after a lost subject, say) is not this build's
        try:
            reply = self.link.ask(protocol_request(Build(family.name, request.arch)), BUILD_TIMEOUT)
        except SubjectLost as lost:
            return {"type": "built", "ok": False, "message": lost.reason, "subject_start": self.link.take_waited()}
        waited = self.link.take_waited()  # the caller counts it as start-up
        if reply.get("type") == "error":
            return {"type": "built", "ok": False, "message": str(reply.get("message")), "subject_start": waited}
        self.families = self.families | {family.name}
        return {"type": "built", "ok": True, "subject_start": waited,
                **{k: reply[k] for k in ("seconds", "cache_hit", "arch", "directory")}}

    def _subject(self, request: SubjectRequest) -> dict[str, Any]:
        family = self.bench.registry.family(request.family)
        result = self.judge.run(family, request.case, request.subject, request.role, request.settings,
                                request.timeout, request.shapes)
        result = dataclasses.replace(result, **self.where)
        return {"type": "result", "result": result_to_dict(result), "healthy": self._healthy()}

    def _checked_call(self, request: "SyncModes | Profile") -> tuple[Any, Any, Case]:
        family = self.bench.registry.family(request.family)
        call, check = self.bench.checked_call(family, request.case, request.subject, request.role, request.seed,
                                              None)
        return call, check, request.case

    def _sync_modes(self, request: SyncModes) -> dict[str, Any]:
        from cudabench.measure import sync_modes

        call, check, _ = self._checked_call(request)
        modes = sync_modes.compare(call, request.iterations, request.warmup, request.busy_ms)
        reply = {"type": "sync-modes", "modes": [dataclasses.asdict(m) for m in modes],
                 "check": {"errors": dict(check.errors), "tolerance": check.tolerance}}
        if request.timeline:  # a few iterations, the earlier GPU work scaled to a few calls
            busy_ms = min(request.busy_ms, 3e3 * modes[0].rest_median)
            reply["timeline"] = sync_modes.timeline(call, request.timeline, min(request.warmup, 3), busy_ms)
            reply["timeline_busy_ms"] = busy_ms
        return reply

    def _transfer(self, request: Transfer) -> dict[str, Any]:
        """Host-to-device copies by every method, then a copy overlapped with a kernel."""
        from cudabench.device import require_gpu
        from cudabench.measure import transfer

        require_gpu()
        copies = transfer.time_copies(list(request.sizes), request.iterations)
        overlap = transfer.overlap(request.overlap_size, request.iterations)
        return {"type": "transfer", "copies": [dataclasses.asdict(c) for c in copies],
                "overlap": dataclasses.asdict(overlap)}

    def _profile(self, request: Profile) -> dict[str, Any]:
        """Build, check and warm up outside the capture; one CUDA-event measurement (for the parent's
        agreement line); then the timed region between cudaProfilerStart/Stop (nsys, ncu), or under
        torch.profiler."""
        from cudabench.measure.profiled import profiled_region

        name = request.subject
        with nvtx.range(f"build and check {name}", "check"):
            call, check, case = self._checked_call(request)
        summary = profiled_region(call, name, request.tool, request.iterations, request.trace)
        summary.update(kernel=name, case=case.key, check=dict(check.errors), nvtx_backend=nvtx.backend())
        return {"type": "profile", "summary": summary}


def prepare_process(device: str, hello: Any) -> None:
    """What a judge or subject process does once at its hello: the CUDA context now (so its pristine
    state can be read), cuBLAS's workspaces (kept per handle and stream from PyTorch's allocator for
    good: made now, they are no subject's peak memory), TF32 off for the process's whole life (the
    state guard restores it after any subject that changes it), NVTX as asked."""
    import torch

    from cudabench.device import require_gpu

    if device == "cuda":
        require_gpu()
        torch.zeros(1, device="cuda").add_(1)
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            torch.mm(torch.zeros(16, 16, device="cuda", dtype=dtype), torch.zeros(16, 16, device="cuda", dtype=dtype))
        torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    nvtx.configure(hello.nvtx, backend=os.environ.get("CUDABENCH_NVTX_BACKEND", "nvtx"),
                   iterations=hello.nvtx_iterations)


def healthy(device: str) -> bool:
    """Whether this process's CUDA context still works (an illegal address or a device-side assert
    breaks it for good)."""
    if device != "cuda":
        return True
    from cudabench.measure.subject import context_broken

    return not context_broken()


def _plain(record: Any) -> dict[str, Any]:
    data = dataclasses.asdict(record)
    data["settings"] = dict(record.settings)
    return data


# ---- the process ---------------------------------------------------------------------------------

BUILD_TIMEOUT = 1800.0


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cudabench.engine.worker")
    parser.add_argument("--request", help="answer this one request (JSON) and exit")
    parser.add_argument("--keep-spare", action="store_true",
                        help="it will serve several runs (a Dask worker's lane): a spare subject process from the start")
    args = parser.parse_args(argv)
    sealed.seal()  # the subject process it starts cannot write into this one's pipes (docs/trust.md)
    channel = Channel()
    handler = Handler(on_status=lambda text: channel.send({"type": "status", "text": text}),
                      eager_subject=not args.request, spare=args.keep_spare and not args.request)
    try:
        from cudabench.engine.preload import preload

        preload()
        if args.request:
            profile = read_request(json.loads(args.request))
            for step in (profile.hello, profile):
                reply = handler.answer(step)
                if reply["type"] == "error":
                    break
            channel.send(reply)
        else:
            serve(channel, handler, sys.stdin)
    except KeyboardInterrupt:
        pass
    finally:
        if handler.link is not None:
            handler.link.close()
        sys.stderr.flush()
        channel.stream.flush()
        # skip interpreter teardown: with a broken CUDA context it can hang or crash
        os._exit(0)


if __name__ == "__main__":
    main()
