"""Where a fresh process's first calls and the caller's planning spend their time (issue 28, docs/benchmarks/warm.md).
Run on the GPU machine from the repository root: python3 .ci/probes/first_calls.py"""
import time, sys, subprocess
t0 = time.perf_counter()
import torch
t_import = time.perf_counter() - t0
def timed(label, fn):
    torch.cuda.synchronize(); t = time.perf_counter(); fn(); torch.cuda.synchronize()
    print(f"{label:44s} {1e3 * (time.perf_counter() - t):8.1f} ms", flush=True)
print(f"{'import torch':44s} {1e3 * t_import:8.1f} ms")
timed("cuda context", lambda: torch.zeros(1, device="cuda"))
timed("mm fp32 (cuBLAS)", lambda: torch.mm(torch.zeros(16, 16, device="cuda"), torch.zeros(16, 16, device="cuda")))
x = torch.randn(8, 64, 256, device="cuda", requires_grad=True); w = torch.randn(64, 1, 256, device="cuda")
timed("conv1d fwd fp32 (cuDNN)", lambda: torch.nn.functional.conv1d(x, w, groups=64, padding=255))
timed("conv1d fwd fp32 again", lambda: torch.nn.functional.conv1d(x, w, groups=64, padding=255))
timed("conv1d fwd+bwd (first backward)", lambda: torch.nn.functional.conv1d(x, w, groups=64, padding=255).sum().backward())
timed("conv1d fwd+bwd again", lambda: torch.nn.functional.conv1d(x, w, groups=64, padding=255).sum().backward())
timed("rfft fp32 (cuFFT)", lambda: torch.fft.rfft(x.detach(), n=512))
timed("rfft fp64 new size", lambda: torch.fft.rfft(x.detach().double(), n=1024))
from cudabench.measure.cupti_activity import activity_per_call, cupti_session, ranged_call, recorded
def cupti_pass():  # as a subject's CUPTI pass makes it: one session, 20 ranged calls, its records read
    with cupti_session() as prof:
        torch.cuda._sleep(1000)
        for _ in range(20):
            ranged_call(lambda: x.detach() * 2)
    activity_per_call(recorded(prof))
for i in range(3):
    timed(f"CUPTI session #{i + 1}", cupti_pass)
q = torch.randn(2, 4, 256, 64, device="cuda", dtype=torch.bfloat16)
timed("SDPA bf16", lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
timed("SDPA bf16 again", lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q))
from cudabench.spec.registry import discover
from cudabench.spec.build import build
t = time.perf_counter(); reg = discover(); print(f"{'discover families':44s} {1e3 * (time.perf_counter() - t):8.1f} ms")
fam = next(f for f in reg.families if f.name == "timex")
t = time.perf_counter(); res = build(fam); print(f"{'build (cache hit) timex':44s} {1e3 * (time.perf_counter() - t):8.1f} ms")
print(res)
t = time.perf_counter()
p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cudabench.cli.app; from cudabench.spec.registry import discover; discover()"], capture_output=True, text=True)
print(f"{'parent: import cli + discover (subprocess)':44s} {1e3 * (time.perf_counter() - t):8.1f} ms")
lines = sorted((l for l in p.stderr.splitlines() if l.startswith("import time:") and "|" in l and l.split("|")[1].strip().isdigit()), key=lambda l: -int(l.split("|")[1]))
print("\n".join(lines[:6]))
t = time.perf_counter(); subprocess.run([sys.executable, "-c", "import cudabench.cli.app"]); print(f"{'parent: import cli only':44s} {1e3 * (time.perf_counter() - t):8.1f} ms")
t = time.perf_counter(); subprocess.run([sys.executable, "-c", "pass"]); print(f"{'python -c pass':44s} {1e3 * (time.perf_counter() - t):8.1f} ms")
