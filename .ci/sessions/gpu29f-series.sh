#!/usr/bin/env bash
# session 29 call F (x2, the session's tree): the sweep on one GPU and on both, alternately, three times each, for the
# two-GPU goal (call B had two of each)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build cudabench build -k timex
SW=configs/timex-sweep.toml
export XDG_RUNTIME_DIR=/tmp/xdg-f; mkdir -m 700 -p $XDG_RUNTIME_DIR
cudabench run --config $SW > "$LOGS/warm-one.log" 2>&1
cudabench run --config $SW --gpus all > "$LOGS/warm-all.log" 2>&1
for i in 1 2 3; do
  step "scale-one-$i" cudabench run --config $SW --json "$LOGS/timex-sweep-one-$i.json"
  step "scale-all-$i" cudabench run --config $SW --gpus all --json "$LOGS/timex-sweep-all-$i.json"
done
cudabench workers --stop > /dev/null 2>&1
python3 .ci/scale_report.py "$LOGS" --goal-share 0.95 > "$LOGS/scale-report.md" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log; do echo "$(basename "$f"): $(grep -h '^time:' -A1 "$f" | tr '\n' ' ' | cut -c1-160)"; done
sed -n '/### timex-sweep/,$p' "$LOGS/scale-report.md" | head -16
