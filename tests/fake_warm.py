"""A stand-in judge for warm-worker tests on the CPU (loaded by `python -m cudabench.engine.warm
--handler tests/fake_warm.py:FakeWarmHandler`). Subjects by name: `hang` sleeps forever, `exit` ends
the process, `invalid` is INVALID, `sleep-S`
sleeps S seconds; any other name is ok. Each result's host names this process and the generation of
its subject process: `warm-<pid>-<generation>`, with the times the subject started and ended."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from cudabench.results.exporters.json_document import case_from_dict  # noqa: E402
from cudabench.results.exporters.json_document import result_to_dict  # noqa: E402
from cudabench.results.records.model import Check, IntegrityCheck, Measurement, Result  # noqa: E402
from cudabench.results.records.stats import summarize  # noqa: E402


class FakeWarmHandler:
    def __init__(self):
        self.on_status = lambda text: None
        self.generation = 0
        self.where = {"gpu": "fake GPU", "gpu_uuid": "fake-uuid"}

    def handle(self, request):
        op = request["op"]
        if op == "hello":
            if os.environ.get("FAKE_FAIL_START"):
                return {"type": "error", "message": "no CUDA device here"}
            return {"type": "ready", "pid": os.getpid(), "ceilings": None,
                    "environment": {"gpu": "fake GPU", "hostname": "fake", "gpu_uuid": "fake-uuid"}}
        if op == "build":
            return {"type": "built", "ok": True, "seconds": 0.0, "cache_hit": True}
        name = request["subject"]
        self.on_status(f"running {name}")
        start = time.time()
        if name == "hang":
            time.sleep(3600)
        if name == "exit":
            os._exit(3)
        if name.startswith("sleep-"):
            time.sleep(float(name[len("sleep-"):]))
        integrity = (IntegrityCheck("fresh-inputs", "fail", "it caches"),) if name == "invalid" else ()
        samples = (1e-3, 1.1e-3, 0.9e-3)
        m = Measurement(samples=samples, timing="sync", warmup_calls=1, warmup_seconds=start,
                        stop_reason=f"{start!r} {time.time()!r}")
        r = Result(case_from_dict(request["case"]), name, request["role"], check=Check((("out", 0.0),), 1e-5),
                   measurement=m, stats=summarize(samples), integrity=integrity,
                   host=f"warm-{os.getpid()}-{self.generation}", gpu="fake GPU", gpu_uuid="fake-uuid")
        return {"type": "result", "result": result_to_dict(r), "healthy": True}

    def renew_subject_process(self):
        self.generation += 1

    def loaded_families(self):
        return ["add2"]
