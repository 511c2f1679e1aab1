#!/usr/bin/env bash
# session 25 call C (x2): the sweep at f30ca3e (before) and 239fded (after: the state guard's quick check, a
# power-of-two reference) alternating, one GPU and both; a probe of the CUPTI phase; the graph hostile test
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
rm -rf /tmp/before && mkdir -p /tmp/before && tar xf scratch/before25.tar -C /tmp/before
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
after compare "$LOGS/timex-sweep-one-1.json" "$LOGS/timex-sweep-all-1.json" > "$LOGS/compare-one-all.txt" 2>&1
env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench workers --stop > /dev/null 2>&1
env XDG_RUNTIME_DIR=/tmp/xdg-before cudabench workers --stop > /dev/null 2>&1
step probe-cupti python3 .ci/sessions/probe25_cupti.py
step graph-after timeout 100 python3 -m pytest -m gpu -q -x tests/gpu/test_integrity_gpu.py -k "every_misbehaviour and graph"
grep -q "1 passed" "$LOGS/graph-after.log" || step graph-before bash -c "cd /tmp/before && PYTHONPATH=/tmp/before:${PYTHONPATH:-} timeout 100 python3 -m pytest -m gpu -q -x tests/gpu/test_integrity_gpu.py -k 'every_misbehaviour and graph' -p no:cacheprovider"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-200)"; done
sed -n '/### timex-sweep/,$p' "$LOGS/scale-report.md" | head -14
for f in "$LOGS"/compare-*.txt; do echo "== $(basename $f): $(grep -cE '│ same' $f) same, $(grep -cE '│ (slower|faster)' $f) apart"; done
grep -h "INVALID\|FAIL" "$LOGS"/scale-*.log | head -5
tail -16 "$LOGS/probe-cupti.log"
tail -3 "$LOGS/graph-after.log"; [ -f "$LOGS/graph-before.log" ] && tail -3 "$LOGS/graph-before.log"
