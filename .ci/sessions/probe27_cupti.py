"""Where a CUPTI pass's time goes: session start, the ranged calls, session end, reading the events."""
import time, statistics, torch
from cudabench.measure.cupti_activity import cupti_session, recorded, activity_per_call, ranged_call

x = torch.randn(32 * 768 * 768 // 4, device="cuda")
y = torch.empty_like(x)
def small():
    torch.mul(x, 1.0001, out=y)
big_a = torch.randn(2048, 2048, device="cuda"); 
def big():
    big_a @ big_a
def many():  # a call of 12 small ops, like a cuDNN baseline's host side
    for _ in range(12):
        torch.mul(x[:1000], 1.0001)

for name, f in (("small", small), ("big", big), ("many", many)):
    for n in (20, 5):
        rows = []
        for rep in range(8):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            with cupti_session("ranges") as prof:
                t1 = time.perf_counter()
                for _ in range(n):
                    ranged_call(f)
                t2 = time.perf_counter()
            t3 = time.perf_counter()
            ev = recorded(prof)
            t4 = time.perf_counter()
            per = activity_per_call(ev)
            t5 = time.perf_counter()
            rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, len(ev), len(per)))
        plain = []
        for rep in range(8):
            torch.cuda.synchronize(); a = time.perf_counter()
            for _ in range(n):
                torch.cuda.synchronize(); f(); torch.cuda.synchronize()
            plain.append(time.perf_counter() - a)
        med = [statistics.median(r[i] for r in rows[2:]) * 1e3 for i in range(5)]
        print(f"{name:6} n={n:2d} start {med[0]:6.2f} calls {med[1]:6.2f} (plain {statistics.median(plain)*1e3:6.2f}) "
              f"end {med[2]:6.2f} read {med[3]:6.2f} per-call {med[4]:6.2f} ms  events {rows[-1][5]} calls {rows[-1][6]}")
