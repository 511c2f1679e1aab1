"""The worker process: where kernels under test run. The parent (cudabench run, check,
compare-sync-modes, profile) starts it with `python -m cudabench.engine.worker`, sends requests on
stdin and reads messages (see protocol.py). One worker serves one GPU and many subjects while it
stays healthy: builds and CUDA start-up are paid once. After a CUDA error it probes its context;
when the context is broken (illegal address, device-side assert) it says so and exits, and the
parent starts a fresh one.

Its own stdout is kept for messages: file descriptor 1 is pointed at stderr, so a kernel's printf
or a library's chatter cannot garble the protocol."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from cudabench import nvtx
from cudabench.engine.protocol import encode
from cudabench.errors import CudabenchError
from cudabench.results.export import result_to_dict
from cudabench.results.model import Case, Result


def case_from_dict(d: dict[str, Any]) -> Case:
    return Case(d["family"], tuple((k, int(v)) for k, v in d["shape"].items()), d["direction"],
                d.get("dtype", "float32"), d.get("inputs", "uniform"))


def case_to_dict(case: Case) -> dict[str, Any]:
    return {"family": case.family, "shape": case.params, "direction": case.direction, "dtype": case.dtype,
            "inputs": case.inputs}


class Handler:
    """Answers one request at a time. `device="cpu"` and `timer_factory` serve tests."""

    def __init__(self, device: str = "cuda", timer_factory: Optional[Callable[[str], Any]] = None,
                 on_status: Callable[[str], None] = lambda s: None) -> None:
        self.device = device
        self.timer_factory = timer_factory
        self.on_status = on_status
        self.bench: Any = None
        self.where: dict[str, Any] = {"host": socket.gethostname(), "gpu": "", "gpu_index": -1, "gpu_uuid": ""}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        try:
            if op == "hello":
                return self._hello(request)
            if self.bench is None:
                return {"type": "error", "message": "the worker got a request before hello"}
            if op == "build":
                return self._build(request)
            if op == "subject":
                return self._subject(request)
            if op == "sync-modes":
                return self._sync_modes(request)
            if op == "profile":
                return self._profile(request)
            if op == "transfer":
                return self._transfer(request)
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
        return {"type": "error", "message": f"unknown request {op!r}"}

    def _healthy(self) -> bool:
        if self.device != "cuda":
            return True
        from cudabench.measure.subject import context_broken

        return not context_broken()

    # ---- requests --------------------------------------------------------------------------------

    def _hello(self, request: dict[str, Any]) -> dict[str, Any]:
        import torch

        from cudabench.device import environment, require_gpu
        from cudabench.measure.subject import Bench
        from cudabench.measure.timers import make_timer
        from cudabench.spec.registry import discover

        registry = discover([Path(d) for d in request.get("kernels_dirs", ())])
        if self.device == "cuda":
            require_gpu()
            torch.zeros(1, device="cuda").add_(1)  # the context now, so its pristine state can be read
            # cuBLAS keeps a workspace per handle and stream from PyTorch's allocator for good: made
            # now, it is no subject's peak memory (else the first subject to multiply pays for it,
            # or none does when the ceilings were measured in this process)
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                torch.mm(torch.zeros(16, 16, device="cuda", dtype=dtype), torch.zeros(16, 16, device="cuda",
                                                                                    dtype=dtype))
            torch.cuda.synchronize()
        # TF32 off for the worker's whole life: every subject computes in true fp32 (and the state
        # guard restores this after any subject that changes it)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        nvtx.configure(request.get("nvtx", False), backend=os.environ.get("CUDABENCH_NVTX_BACKEND", "nvtx"),
                       iterations=request.get("nvtx_iterations", False))
        env = environment(request.get("settings") or {})
        self.where.update(gpu=env.gpu, gpu_index=env.gpu_index, gpu_uuid=env.gpu_uuid)
        ceilings = None
        if request.get("ceilings") and self.device == "cuda":
            from cudabench.measure import ceilings as device_ceilings

            self.on_status("this GPU's ceilings (measured once, then cached)")
            ceilings = device_ceilings.get()
        self.bench = Bench(registry, self.device, self.timer_factory or make_timer, ceilings,
                           on_status=lambda text: self.on_status(text))
        return {"type": "ready", "pid": os.getpid(), "environment": _plain(env),
                "ceilings": dataclasses.asdict(ceilings) if ceilings else None}

    def _build(self, request: dict[str, Any]) -> dict[str, Any]:
        from cudabench.spec.build import build

        family = self.bench.registry.family(request["family"])
        try:
            built = build(family, request.get("arch"))
        except CudabenchError as exc:
            return {"type": "built", "ok": False, "message": exc.message}
        self.bench.modules[family.name] = built.module
        return {"type": "built", "ok": True, "seconds": built.seconds, "cache_hit": built.cache_hit,
                "arch": built.arch, "directory": str(built.directory)}

    def _subject(self, request: dict[str, Any]) -> dict[str, Any]:
        from cudabench.measure.settings import Settings
        from cudabench.measure.subject import first_line

        family = self.bench.registry.family(request["family"])
        case = case_from_dict(request["case"])
        settings = Settings(**request["settings"])
        healthy = True
        try:
            result = self.bench.run(family, case, request["subject"], request["role"], settings)
        except CudabenchError as exc:
            result = Result(case, request["subject"], request["role"], skipped=exc.message)
        except (RuntimeError, ValueError, TypeError, KeyError, AssertionError) as exc:
            # a binding's TORCH_CHECK, a CUDA error, out of memory: recorded against this subject
            result = Result(case, request["subject"], request["role"], error=first_line(exc))
            healthy = self._healthy()
        result = dataclasses.replace(result, **self.where)
        return {"type": "result", "result": result_to_dict(result), "healthy": healthy}

    def _checked_call(self, request: dict[str, Any]) -> tuple[Any, Any, Case]:
        family = self.bench.registry.family(request["family"])
        case = case_from_dict(request["case"])
        call, check = self.bench.checked_call(family, case, request["subject"], request.get("role", "variant"),
                                              request["seed"], request.get("arch"))
        return call, check, case

    def _sync_modes(self, request: dict[str, Any]) -> dict[str, Any]:
        from cudabench.measure import sync_modes

        call, check, _ = self._checked_call(request)
        modes = sync_modes.compare(call, request["iterations"], request["warmup"], request["busy_ms"])
        reply = {"type": "sync-modes", "modes": [dataclasses.asdict(m) for m in modes],
                 "check": {"errors": dict(check.errors), "tolerance": check.tolerance}}
        if request.get("timeline"):  # a few iterations, the earlier GPU work scaled to a few calls
            busy_ms = min(request["busy_ms"], 3e3 * modes[0].rest_median)
            reply["timeline"] = sync_modes.timeline(call, request["timeline"], min(request["warmup"], 3), busy_ms)
            reply["timeline_busy_ms"] = busy_ms
        return reply

    def _transfer(self, request: dict[str, Any]) -> dict[str, Any]:
        """Host-to-device copies by every method, then a copy overlapped with a kernel."""
        from cudabench.device import require_gpu
        from cudabench.measure import transfer

        require_gpu()
        copies = transfer.time_copies(list(request["sizes"]), request["iterations"])
        overlap = transfer.overlap(request["overlap_size"], request["iterations"])
        return {"type": "transfer", "copies": [dataclasses.asdict(c) for c in copies],
                "overlap": dataclasses.asdict(overlap)}

    def _profile(self, request: dict[str, Any]) -> dict[str, Any]:
        """Build, check and warm up outside the capture; one CUDA-event measurement (for the parent's
        agreement line); then the timed region between cudaProfilerStart/Stop (nsys, ncu), or under
        torch.profiler."""
        from cudabench.measure.profiled import profiled_region

        name = request["subject"]
        with nvtx.range(f"build and check {name}", "check"):
            call, check, case = self._checked_call(request)
        summary = profiled_region(call, name, request["tool"], request["iterations"], request.get("trace"))
        summary.update(kernel=name, case=case.key(), check=dict(check.errors), nvtx_backend=nvtx.backend())
        return {"type": "profile", "summary": summary}


def _plain(record: Any) -> dict[str, Any]:
    data = dataclasses.asdict(record)
    data["settings"] = dict(record.settings)
    return data


# ---- the process ---------------------------------------------------------------------------------

class Channel:
    """Messages on the original stdout; fd 1 then points at stderr for everything else."""

    def __init__(self) -> None:
        sys.stdout.flush()
        self.stream: TextIO = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)

    def send(self, message: dict[str, Any]) -> None:
        self.stream.write(encode(message))
        self.stream.flush()


def serve(channel: Channel, handler: Handler, requests: TextIO) -> None:
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError:
            channel.send({"type": "error", "message": f"unreadable request {line[:100]!r}"})
            continue
        if request.get("op") == "exit":
            return
        reply = handler.handle(request)
        channel.send(reply)
        if reply.get("healthy") is False:
            return  # a broken CUDA context: exit, the parent starts a fresh worker


def preload() -> None:
    """Import torch and the measuring code and create the CUDA context before the first request:
    the parent is still planning meanwhile, so the hello finds them ready. A failure here is left
    for the hello to report."""
    try:
        import torch

        import cudabench.measure.subject  # noqa: F401

        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")
    except Exception:  # noqa: BLE001 - reported by the hello, which does the same steps
        pass


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cudabench.engine.worker")
    parser.add_argument("--request", help="answer this one request (JSON) and exit")
    args = parser.parse_args(argv)
    channel = Channel()
    handler = Handler(on_status=lambda text: channel.send({"type": "status", "text": text}))
    try:
        preload()
        if args.request:
            request = json.loads(args.request)
            for step in (request["hello"], request):
                reply = handler.handle(step)
                if reply["type"] == "error":
                    break
            channel.send(reply)
        else:
            serve(channel, handler, sys.stdin)
    except KeyboardInterrupt:
        pass
    finally:
        sys.stderr.flush()
        channel.stream.flush()
        # skip interpreter teardown: with a broken CUDA context it can hang or crash
        os._exit(0)


if __name__ == "__main__":
    main()
