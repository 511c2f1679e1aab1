"""What one judged call's steps cost beyond the call itself, on the GPU host (session 28, for the next
session's choice of a one-request judged call): a child process stands in for the subject process
(SpinningLines on its stdin, replies through the protocol's MARK lines), this process for the judge
(ProcessWorker, its reader thread and queue). Median µs over N requests each:

  pipe        a request the child answers at once
  child-sync  the child launches a tiny kernel and synchronizes before it answers
  alternate   this process launches a tiny kernel and synchronizes, then asks child-sync (two contexts
              taking turns, as the judge's write and the subject's call do)
  share-open  the child allocates a new 1 MiB tensor and shares it; this process maps it (open_shared)
              and reads one value back (as the judge opens a call's outputs)
  same-open   as share-open, the child's tensor kept: the same allocation shared each time
"""
import json
import statistics
import sys
import time

CHILD = r"""
import json, sys, torch
from cudabench.engine.protocol import MARK
from cudabench.engine.subject_worker import SpinningLines
from cudabench.measure.transport import share
x = torch.zeros(1 << 18, device="cuda"); torch.cuda.synchronize()
kept = torch.zeros(1 << 18, device="cuda")
for line in SpinningLines(0):
    op = json.loads(line)["op"]
    reply = {"type": op}
    if op == "child-sync":
        x.add_(1); torch.cuda.synchronize()
    elif op == "share-open":
        t = torch.ones(1 << 18, device="cuda"); torch.cuda.synchronize(); reply["t"] = share(t); last = t
    elif op == "same-open":
        reply["t"] = share(kept)
    sys.stdout.write(MARK + json.dumps(reply) + "\n"); sys.stdout.flush()
"""


def main(n: int = 500) -> None:
    import torch

    from cudabench.engine.workers import ProcessWorker
    from cudabench.measure.transport import open_shared

    child = ProcessWorker([sys.executable, "-c", CHILD])
    y = torch.zeros(1 << 18, device="cuda")
    torch.cuda.synchronize()
    rows = {}
    for name in ("pipe", "child-sync", "alternate", "share-open", "same-open"):
        times = []
        for i in range(n + 50):
            t0 = time.perf_counter()
            if name == "alternate":
                y.add_(1)
                torch.cuda.synchronize()
            op = "child-sync" if name == "alternate" else ("noop" if name == "pipe" else name)
            reply = child.request({"op": op}, 60)
            if "t" in reply:
                float(open_shared(reply["t"])[0])
            if i >= 50:
                times.append(time.perf_counter() - t0)
        rows[name] = statistics.median(times) * 1e6
    t0 = time.perf_counter()
    for _ in range(n):
        y.add_(1)
        torch.cuda.synchronize()
    rows["own-sync"] = (time.perf_counter() - t0) / n * 1e6
    child.kill()
    print(json.dumps({k: round(v, 1) for k, v in rows.items()}))


if __name__ == "__main__":
    main()
