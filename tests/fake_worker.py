"""A stand-in worker process speaking the real protocol, for CPU tests of the engine. What it does
with a subject depends on the subject's name: `hang` sleeps forever, `exit` calls os._exit(3),
`segv` kills itself with SIGSEGV, `garbage` writes a garbled message, `chatty` prints log lines
first, `broken` reports a broken CUDA context, `sleep-S` sleeps S seconds first, `kill-parent`
kills the process that started it (a Dask worker, say) and `kill-parent-once` does so only the
first time in a run ($FAKE_MARKER names the file that says it happened), `shapes-fail` fails its
random-shapes check unless its request carries another GPU's verdict (its detail then says so); any
other name gets an ok result. Its GPU is $FAKE_GPU_NAME (default "fake GPU"), UUID $CUDA_VISIBLE_DEVICES (default
"pid-" and its parent's process id); with $FAKE_FAIL_START set it cannot start. `exit-for-good` exits as `exit`
does after half a second, first creating the file $FAKE_NO_RESTART names: a worker started after that takes a
second, then cannot start.

    python tests/fake_worker.py [slow-start]"""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from cudabench.engine.protocol import MARK, encode  # noqa: E402
from cudabench.results.exporters.json_document import case_from_dict  # noqa: E402
from cudabench.results.exporters.json_document import result_to_dict  # noqa: E402
from cudabench.results.records.model import Check, IntegrityCheck, Measurement, Result  # noqa: E402
from cudabench.results.records.stats import summarize  # noqa: E402


GPU = os.environ.get("FAKE_GPU_NAME", "fake GPU")
UUID = os.environ.get("CUDA_VISIBLE_DEVICES") or f"pid-{os.getppid()}"


def send(message):
    sys.stdout.write(encode(message))
    sys.stdout.flush()


def result(request, **fields):
    samples = (1e-3, 1.1e-3, 0.9e-3)
    m = Measurement(samples=samples, timing="sync", warmup_calls=1, warmup_seconds=0.0, stop_reason="test")
    name = request["subject"]
    took = float(name[len("sleep-"):]) if name.startswith("sleep-") else 0.01
    r = Result(case_from_dict(request["case"]), name, request["role"], check=Check((("out", 0.0),), 1e-5),
               measurement=m, stats=summarize(samples), host="fake", gpu=GPU, gpu_uuid=UUID,
               phases=(("sampling", took),), **fields)
    return result_to_dict(r)


def main():
    if "slow-start" in sys.argv:
        time.sleep(60)
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "exit":
            return
        if op == "hello":
            if os.environ.get("FAKE_NO_RESTART") and os.path.exists(os.environ["FAKE_NO_RESTART"]):
                time.sleep(1.0)
                send({"type": "error", "message": f"no CUDA device on {UUID} any more"})
                continue
            if os.environ.get("FAKE_FAIL_START"):
                send({"type": "error", "message": f"no CUDA device on {UUID}"})
                continue
            send({"type": "ready", "pid": os.getpid(), "environment": {"gpu": GPU, "hostname": "fake",
                                                                        "gpu_uuid": UUID}, "ceilings": None})
        elif op == "build":
            send({"type": "built", "ok": True, "seconds": 0.0, "cache_hit": True})
        elif op == "subject":
            name = request["subject"]
            send({"type": "status", "text": f"running {name}"})
            if name.startswith("sleep-"):
                time.sleep(float(name[len("sleep-"):]))
            if name == "kill-parent" or (name == "kill-parent-once" and not os.path.exists(os.environ["FAKE_MARKER"])):
                if name == "kill-parent-once":
                    open(os.environ["FAKE_MARKER"], "w").close()
                os.kill(os.getppid(), signal.SIGKILL)
                os._exit(0)
            if name == "hang":
                time.sleep(3600)
            elif name in ("exit", "exit-for-good"):
                if name == "exit-for-good":
                    time.sleep(0.5)  # the other lanes' workers have started by then
                    open(os.environ["FAKE_NO_RESTART"], "w").close()
                sys.stderr.write("about to exit\n")
                sys.stderr.flush()
                os._exit(3)
            elif name == "segv":
                os.kill(os.getpid(), signal.SIGSEGV)
            elif name == "garbage":
                sys.stdout.write(MARK + "{this is not json\n")
                sys.stdout.flush()
                time.sleep(3600)
            elif name == "broken":
                send({"type": "result", "result": result(request, error="CUDA error: an illegal memory access "
                                                                        "was encountered"), "healthy": False})
                return
            elif name == "shapes-fail":
                given = request.get("shapes") or ()
                check = IntegrityCheck("shapes", "not run", f"given {list(given)}") if given else \
                    IntegrityCheck("shapes", "fail", "wrong at n=3")
                send({"type": "result", "result": result(request, integrity=(check,)), "healthy": True})
            else:
                if name == "chatty":
                    print("a kernel's printf, not a message", flush=True)
                send({"type": "result", "result": result(request), "healthy": True})


if __name__ == "__main__":
    main()
