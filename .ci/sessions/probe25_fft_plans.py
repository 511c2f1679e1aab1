"""Session 25: the timex fp64 reference at the random shapes the variants are checked at, its transforms
2T long against a power of two long, each in a fresh process so that no cuFFT plan is cached: how long a
first call at a new shape takes. Usage: python3 probe25_fft_plans.py MODE SEED (MODE: 2T or pow2)."""
import random, statistics, sys, time
import torch
from cudabench.spec.fuzz import random_shapes
from cudabench.spec.registry import discover
sys.path.insert(0, "kernels/timex")
import importlib.util
spec = importlib.util.spec_from_file_location("timex_spec", "kernels/timex/spec.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)

mode, seed = sys.argv[1], int(sys.argv[2])
fam = discover().family("timex")
rng = random.Random(seed)
shapes = []
for v in fam.variants:
    shapes += random_shapes(fam, v, 2, rng)
torch.ones(1, device="cuda").sum().item()
x = torch.rand(4, 4, 64, device="cuda", dtype=torch.float64); torch.fft.rfft(x, n=128); torch.cuda.synchronize()
rows = []
for s in shapes:
    B, C, T = s["B"], s["C"], s["T"]
    w = torch.rand(C, T, device="cuda", dtype=torch.float64); k = torch.rand(B, C, T, device="cuda", dtype=torch.float64)
    n = 2 * T if mode == "2T" else 1 << (2 * T - 1).bit_length()
    ts = []
    for _ in range(2):
        torch.cuda.synchronize(); t = time.perf_counter()
        mod.fft_conv(w, k, 0.5, n=n); torch.cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    rows.append((B, C, T, n, ts[0], ts[1]))
for r in rows:
    print(f"{mode:5} B={r[0]:3} C={r[1]:4} T={r[2]:5} n={r[3]:6} first {r[4]:7.1f} ms  again {r[5]:6.2f} ms")
print(f"{mode:5} seed {seed}: {len(rows)} shapes, first calls {sum(r[4] for r in rows):.0f} ms in all, "
      f"median {statistics.median(r[4] for r in rows):.1f} ms")
