"""Tables for docs/benchmarks/scale.md from the results files of `bash .ci/gpu scale`: per run, the
subjects measured, the GPUs used, how far each median is from the mean of the two one-GPU runs, the
statuses; then what the run with a killed Dask worker recorded.    python3 .ci/scale_table.py LOGS"""
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
def load(name):
    p = out / f"{name}.json"
    return json.load(open(p)) if p.exists() else None
docs = {n: load(n) for n in ("before-1", "one-1", "one-2", "all-1", "all-2", "dask-1", "dask-2", "dask-killed")}
def key(r): return (r["case"]["key"], r["subject"])
def med(d): return {key(r): r["stats"]["median"] for r in d["results"] if r["stats"] and r["status"] == "ok"}
base = {}
for n in ("one-1", "one-2"):
    for k, v in med(docs[n]).items(): base.setdefault(k, []).append(v)
base = {k: statistics.mean(v) for k, v in base.items()}
print(f"{'run':11} {'n ok':>5} {'GPUs used':>9}  max|median/one-GPU-1|  median|...|  statuses")
for n, d in docs.items():
    if d is None: print(n, "missing"); continue
    m = med(d); dev = [abs(m[k] / base[k] - 1) for k in m if k in base]
    used = {(r.get("host"), r.get("gpu_index"), r.get("gpu_uuid", "")[:12]) for r in d["results"] if r.get("gpu")}
    st = {}
    for r in d["results"]: st[r["status"]] = st.get(r["status"], 0) + 1
    print(f"{n:11} {len(m):5} {len(used):9}  {max(dev):8.2%}  {statistics.median(dev):8.2%}  {st}  {sorted(used)}")
bad = [(key(r), r["status"], (r.get("error") or "")[:120]) for r in docs["dask-killed"]["results"] if r["status"] != "ok"] if docs["dask-killed"] else []
print("dask-killed, not ok:", bad)
for n in ("one-1", "all-1", "dask-1"):
    d = docs[n]
    if d is None: continue
    worst = sorted(((abs(med(d)[k] / base[k] - 1), k) for k in med(d) if k in base), reverse=True)[:4]
    print(n, "largest deviations:", [(f"{x:.2%}", k[0][6:30], k[1]) for x, k in worst])
