#!/usr/bin/env bash
# session 26 call B (x2, b33f3db): the GPU tests the changes touch (CUPTI ranges-only sessions, the draw
# during the poison request, six + six judged calls), two at a time; then the sweep at 5a3d337 (before) and
# b33f3db (after) alternating, on one GPU and on both
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
T0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build build_all
echo "built at $(( $(date +%s) - T0 )) s"
mkdir -m 700 -p /tmp/xdg0 /tmp/xdg1 /tmp/xdg-before /tmp/xdg-after
( export CUDA_VISIBLE_DEVICES=0 XDG_RUNTIME_DIR=/tmp/xdg0
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_misbehaviour or graph_calls or impossible or crashes" > "$LOGS/pytest-integrity-a.log" 2>&1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 XDG_RUNTIME_DIR=/tmp/xdg1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class or tuned or state_left or cli_run or no_integrity or memory" > "$LOGS/pytest-integrity-b.log" 2>&1 ) &
wait
echo "tests done at $(( $(date +%s) - T0 )) s"
for x in /tmp/xdg0 /tmp/xdg1; do XDG_RUNTIME_DIR=$x cudabench workers --stop > /dev/null 2>&1; done
rm -rf /tmp/before && mkdir -p /tmp/before && tar xf scratch/before26.tar -C /tmp/before
SW=configs/timex-sweep.toml
before() { env PYTHONPATH=/tmp/before:${PYTHONPATH:-} XDG_RUNTIME_DIR=/tmp/xdg-before bash -c "cd /tmp/before && python3 -m cudabench $*"; }
after() { env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench "$@"; }
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
for i in 1 2; do after compare "$LOGS/before-one-$i.json" "$LOGS/timex-sweep-one-$i.json" > "$LOGS/compare-before-after-$i.txt" 2>&1; done
after compare "$LOGS/timex-sweep-one-1.json" "$LOGS/timex-sweep-all-1.json" > "$LOGS/compare-one-all.txt" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename $f)"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)" "$f" | tail -6; done
for f in "$LOGS"/scale-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-230)"; done
sed -n '/### timex-sweep/,$p' "$LOGS/scale-report.md" | head -14
for f in "$LOGS"/compare-*.txt; do echo "== $(basename $f): $(grep -cE '│ same' $f) same, $(grep -cE '│ (slower|faster)' $f) apart"; done
grep -h "INVALID\|FAIL" "$LOGS"/scale-*.log | head -5
