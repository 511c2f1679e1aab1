#!/usr/bin/env bash
# session 31 call A (x2): why a run's first subject samples longer. The probe in fresh processes; then the sweep
# warm on one GPU, traced (the first subject's hot request step by step), then untraced on one GPU and on both.
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
step probe-1 python3 .ci/sessions/probe31_first_subject.py
step probe-2 python3 .ci/sessions/probe31_first_subject.py
step build cudabench build -k timex
SW=configs/timex-sweep.toml
export XDG_RUNTIME_DIR=/tmp/xdg-a; mkdir -m 700 -p $XDG_RUNTIME_DIR
step warm-start cudabench run --config $SW
sleep 3
mkdir -p "$LOGS/trace"
step traced env CB_TRACE="$LOGS/trace" PYTHONPATH=.ci/harness_trace:$PYTHONPATH cudabench run --config $SW --json "$LOGS/traced.json"
sleep 3
step one-1 cudabench run --config $SW --json "$LOGS/one-1.json"
sleep 3
step all-1 cudabench run --config $SW --gpus all --json "$LOGS/all-1.json"
sleep 3
step one-2 cudabench run --config $SW --json "$LOGS/one-2.json"
sleep 3
step all-2 cudabench run --config $SW --gpus all --json "$LOGS/all-2.json"
cudabench workers --stop > /dev/null 2>&1
printf '  %s\n' "${SUMMARY[@]}"
cat "$LOGS/probe-1.log" "$LOGS/probe-2.log"
for f in "$LOGS"/one-*.log "$LOGS"/all-*.log "$LOGS"/traced.log; do echo "$(basename "$f"): $(grep -h '^time:' -A1 "$f" | tr '\n' ' ' | cut -c1-200)"; done
python3 - "$LOGS" <<'PY'
import json, sys, glob, os
logs = sys.argv[1]
for f in sorted(glob.glob(os.path.join(logs, "*-[12].json"))) + [os.path.join(logs, "traced.json")]:
    d = json.load(open(f)); firsts = {}
    for r in d["results"]:
        firsts.setdefault(r.get("gpu_index"), r)
    print(os.path.basename(f), "wall %.2f" % d["run_time"]["wall"],
          [(g, r["subject"], round(r["phases"].get("sampling", 0), 3), len(r["measurement"]["samples"])) for g, r in firsts.items()])
rows = []
for f in glob.glob(os.path.join(logs, "trace", "trace-*.jsonl")):
    rows += [json.loads(l) for l in open(f)]
hots = sorted([r for r in rows if r[2] == "BlindRunner.hot"], key=lambda r: r[3])[:2]
for h in hots:
    print("HOT %.4f" % (h[4] - h[3]))
    for r in sorted(rows, key=lambda r: r[3]):
        if r[0] == h[0] and r[3] >= h[3] - 1e-4 and r[4] <= h[4] + 1e-4 and r[2] not in ("EventTimer.samples", "BlindRunner.sync", "BlindRunner.hot", "SubjectHandler.handle"):
            print("   %-28s %8.4f %8.4f %s" % (r[2], r[3] - h[3], r[4] - r[3], r[5][:40]))
PY
