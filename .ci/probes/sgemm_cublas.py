"""cuBLAS SGEMM (torch.matmul, TF32 off) at the sizes of sgemm_variants.cu, timed the same way."""
import torch
torch.backends.cuda.matmul.allow_tf32 = False
for n in (4096, 2048, 8192):
    a = torch.rand(n, n, device="cuda") - 0.5; b = torch.rand(n, n, device="cuda") - 0.5
    for _ in range(3): torch.matmul(a, b)
    ts = []
    for _ in range(30 if n < 8192 else 10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); torch.matmul(a, b); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1))
    ts.sort(); ms = ts[len(ts) // 2]
    print(f"n={n} cuBLAS SGEMM     {ms:8.3f} ms {2*n**3/ms/1e9:6.1f} TFLOP/s")
