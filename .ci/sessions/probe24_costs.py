"""Session 24: what one subject's host steps cost on the GPU machine, in one process (no IPC): the subject
process's open and finish and their parts, a hot request's parts, a CUPTI pass's parts, the judge's draw,
write and input compare. Prints medians over repeats."""
import statistics, time, sys, json
import torch
from cudabench.measure.blind import BlindRunner
from cudabench.measure.settings import Settings
from cudabench.measure.subject import case_inputs
from cudabench.measure.memory import release_cached
from cudabench.measure import cupti_activity as ca
from cudabench.measure.cupti_pass import cupti_pass
from cudabench.measure.timers import make_timer
from cudabench.results.records.model import Case
from cudabench.spec.registry import discover

reg = discover()
times = {}
def timed(name, fn, *a, **k):
    torch.cuda.synchronize(); t = time.perf_counter(); out = fn(*a, **k); torch.cuda.synchronize()
    times.setdefault(name, []).append((time.perf_counter() - t) * 1e3); return out

r = BlindRunner(reg, "cuda")
fam = reg.family("timex")
case = Case("timex", (("B", 32), ("C", 768), ("T", 64)), "fwd", "float32")
st = Settings(timing="events", seed=7)
for i in range(12):
    timed("open", r.open, "timex", case, "timex-v4", "variant", st, [([32, 768, 64], "float32")])
    timed("poison", r.poison); timed("call", r.call)
    timed("hot", r.hot)
    for _ in range(3):
        timed("poison(after hot)", r.poison); timed("call(after hot)", r.call)
    timed("order", r.order)
    timed("finish", r.finish)
    timed("guard.restore", r.guard.restore)
    timed("release_cached", release_cached)
    timed("module", r.module, fam, None)
    timed("case_inputs", case_inputs, fam, case, 7, "cuda")
# a CUPTI pass's parts on a fast call
x = torch.randn(32 * 768 * 64, device="cuda"); f = lambda: x * 2
for i in range(10):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    with ca.cupti_session() as prof:
        t1 = time.perf_counter()
        for _ in range(23):
            ca.ranged_call(f)
        t2 = time.perf_counter()
    t3 = time.perf_counter(); ev = ca.recorded(prof); t4 = time.perf_counter(); per = ca.activity_per_call(ev); t5 = time.perf_counter()
    for n, v in (("cupti enter", t1 - t0), ("cupti 23 ranged calls", t2 - t1), ("cupti exit", t3 - t2),
                 ("cupti recorded", t4 - t3), ("cupti per call", t5 - t4)):
        times.setdefault(n, []).append(v * 1e3)
    times.setdefault("cupti events", []).append(len(ev))
for i in range(20):
    torch.cuda.synchronize(); t = time.perf_counter(); ca.ranged_call(f); times.setdefault("ranged call, no session", []).append((time.perf_counter() - t) * 1e3)
    torch.cuda.synchronize(); t = time.perf_counter(); f(); torch.cuda.synchronize(); times.setdefault("plain call+sync", []).append((time.perf_counter() - t) * 1e3)
for k, v in times.items():
    print(f"{k:28s} median {statistics.median(v):8.3f} ms   min {min(v):8.3f}  n={len(v)}")
