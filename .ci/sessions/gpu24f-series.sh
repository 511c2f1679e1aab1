#!/usr/bin/env bash
# session 24 call F (x2, ee77dad): the sweep on one GPU and on both at the session's last commit (the scheduler's
# new leftover pass runs only when a lane fails; here it must change nothing)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
SW=configs/timex-sweep.toml
step build cudabench build -k timex
step warm-one cudabench run --config $SW
step warm-all cudabench run --config $SW --gpus all
for i in 1 2; do
  step "scale-after-one-$i" cudabench run --config $SW --json "$LOGS/timex-sweep-one-$i.json"
  step "scale-after-all-$i" cudabench run --config $SW --gpus all --json "$LOGS/timex-sweep-all-$i.json"
done
python3 .ci/scale_report.py "$LOGS" > "$LOGS/scale-report.md" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-160)"; done
sed -n '/### timex-sweep/,/^What bounded/p' "$LOGS/scale-report.md" | head -12
