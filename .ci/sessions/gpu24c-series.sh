#!/usr/bin/env bash
# session 24 call C (x2): the sweep at 095e069 (before) and 637eb3d (after: clocks per run of samples, the
# stream-order hold, warm-up 10 ms) alternating, one GPU and both; then a probe of one subject's host steps
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
rm -rf /tmp/before && mkdir -p /tmp/before && tar xf scratch/before24.tar -C /tmp/before
mkdir -m 700 -p /tmp/xdg-before /tmp/xdg-after
SW=configs/timex-sweep.toml
before() { env PYTHONPATH=/tmp/before:${PYTHONPATH:-} XDG_RUNTIME_DIR=/tmp/xdg-before bash -c "cd /tmp/before && python3 -m cudabench $*"; }
after() { env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench "$@"; }
step build cudabench build -k timex
step warm-before-one before run --config $SW
step warm-after-one after run --config $SW
step warm-before-all before run --config $SW --gpus all
step warm-after-all after run --config $SW --gpus all
for i in 1 2; do
  step "scale-before-one-$i" before run --config $SW --json "$LOGS/before-one-$i.json"
  step "scale-after-one-$i" after run --config $SW --json "$LOGS/timex-sweep-one-$i.json"
  step "scale-before-all-$i" before run --config $SW --gpus all --json "$LOGS/before-all-$i.json"
  step "scale-after-all-$i" after run --config $SW --gpus all --json "$LOGS/timex-sweep-all-$i.json"
done
python3 .ci/scale_report.py "$LOGS" > "$LOGS/scale-report.md" 2>&1
after compare "$LOGS/before-one-1.json" "$LOGS/timex-sweep-one-1.json" > "$LOGS/compare-before-after-1.txt" 2>&1
after compare "$LOGS/before-one-2.json" "$LOGS/timex-sweep-one-2.json" > "$LOGS/compare-before-after-2.txt" 2>&1
after compare "$LOGS/before-one-1.json" "$LOGS/before-one-2.json" > "$LOGS/compare-before-before.txt" 2>&1
env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench workers --stop > /dev/null 2>&1
env XDG_RUNTIME_DIR=/tmp/xdg-before cudabench workers --stop > /dev/null 2>&1
step probe python3 scratch/probe_costs.py   # kept as .ci/sessions/probe24_costs.py
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-200)"; done
sed -n '/### timex-sweep/,$p' "$LOGS/scale-report.md" | head -12
for f in "$LOGS"/compare-*.txt; do echo "== $(basename $f): $(grep -cE '│ same' $f) same, $(grep -cE '│ (slower|faster)' $f) apart"; done
cat "$LOGS/probe.log" | tail -24
