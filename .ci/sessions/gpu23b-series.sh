#!/usr/bin/env bash
# session 23 call B (x2): issue 28's sweep at 2b807b1 (before) and adaab53 (requests sent ahead, shapes claims,
# first CUPTI session in the spare, cheaper process watch), alternating, one GPU and all; warm-up 25 vs 10 ms;
# then the warm-worker and run GPU tests on the new tree
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
rm -rf /tmp/before && mkdir -p /tmp/before && tar xf scratch/before23.tar -C /tmp/before
mkdir -m 700 -p /tmp/xdg-before /tmp/xdg-after
SWEEP=configs/timex-sweep.toml
before() { env PYTHONPATH=/tmp/before:${PYTHONPATH:-} XDG_RUNTIME_DIR=/tmp/xdg-before bash -c "cd /tmp/before && python3 -m cudabench $*"; }
after() { env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench "$@"; }
step build cudabench build -k timex
step warm-before-one before run --config $SWEEP
step warm-after-one after run --config $SWEEP
step warm-before-all before run --config $SWEEP --gpus all
step warm-after-all after run --config $SWEEP --gpus all
for i in 1 2; do
  step "scale-before-one-$i" before run --config $SWEEP --json "$LOGS/before-one-$i.json"
  step "scale-after-one-$i" after run --config $SWEEP --json "$LOGS/timex-sweep-one-$i.json"
  step "scale-before-all-$i" before run --config $SWEEP --gpus all --json "$LOGS/before-all-$i.json"
  step "scale-after-all-$i" after run --config $SWEEP --gpus all --json "$LOGS/timex-sweep-all-$i.json"
done
for i in 1 2; do
  step "warmup10-$i" after run --config $SWEEP --warmup 10ms --json "$LOGS/warmup10-$i.json"
done
python3 .ci/scale_report.py "$LOGS" > "$LOGS/scale-report.md" 2>&1
after compare "$LOGS/timex-sweep-one-1.json" "$LOGS/timex-sweep-one-2.json" > "$LOGS/compare-25-25.txt" 2>&1
after compare "$LOGS/timex-sweep-one-1.json" "$LOGS/warmup10-1.json" > "$LOGS/compare-25-10a.txt" 2>&1
after compare "$LOGS/timex-sweep-one-2.json" "$LOGS/warmup10-2.json" > "$LOGS/compare-25-10b.txt" 2>&1
after compare "$LOGS/before-one-1.json" "$LOGS/timex-sweep-one-1.json" > "$LOGS/compare-before-after.txt" 2>&1
env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench workers --stop > /dev/null 2>&1
env XDG_RUNTIME_DIR=/tmp/xdg-before cudabench workers --stop > /dev/null 2>&1
step pytest-warm python3 -m pytest -m gpu -rA -q tests/gpu/test_warm_gpu.py
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log "$LOGS"/warmup10-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-250)"; done
sed -n 1,40p "$LOGS/scale-report.md"
for f in "$LOGS"/compare-*.txt; do echo "== $f"; tail -4 "$f"; done
grep -h -E "passed|failed" "$LOGS"/pytest-*.log | tail -3
