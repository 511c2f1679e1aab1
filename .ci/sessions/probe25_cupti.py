"""Session 25: where a subject's "integrity/cupti" phase goes (the hot request beyond warm-up and sampling), for
the sweep's conv1d baseline against timex-v4, at T = 64 and 1024: the CUPTI pass's own time, its calls and
events, and the same calls in a session without host ops. One process, no IPC."""
import statistics, time
import torch
from cudabench.measure.blind import BlindRunner
from cudabench.measure.settings import Settings
from cudabench.measure import cupti_activity as ca
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover

reg = discover()
r = BlindRunner(reg, "cuda")
st = Settings(timing="events", seed=7)
rows = []
for T in (64, 1024):
    case = Case("timex", (("B", 32), ("C", 768), ("T", T)), "fwd", "float32")
    for name, role in (("conv1d", "baseline"), ("timex-v4", "variant")):
        for rep in range(3):
            r.open("timex", case, name, role, st, [([32, 768, T], "float32")])
            r.poison(); r.call()
            t = time.perf_counter(); hot = r.hot(); total = time.perf_counter() - t
            m = hot["measurement"]; cp = hot["cupti"]
            call = r._opened().workload().call
            n = len(cp["kernel_samples"])
            for host_ops in (True, False):
                torch.cuda.synchronize(); t0 = time.perf_counter()
                with ca.cupti_session(host_ops=host_ops) as prof:
                    for _ in range(n):
                        ca.ranged_call(call)
                t1 = time.perf_counter(); ev = ca.recorded(prof); t2 = time.perf_counter()
                rows.append((T, name, rep, host_ops, total * 1e3, hot["sampling_seconds"] * 1e3,
                             m["warmup_seconds"] * 1e3, cp["seconds"] * 1e3, n, (t1 - t0) * 1e3, (t2 - t1) * 1e3, len(ev)))
            r.finish()
print("T     subject   rep host_ops  hot_ms  sampling  warmup  pass_ms  calls  session_ms  read_ms  events")
for row in rows:
    print("%-5d %-9s %3d %-8s %7.1f %8.1f %7.1f %8.1f %6d %10.1f %8.1f %7d" % row)
