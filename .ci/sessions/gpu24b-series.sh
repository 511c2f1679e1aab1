#!/usr/bin/env bash
# session 24 call B (x1): the working tree (warm-up 10 ms, the stream-order hold from the eager call). (1) add2 under
# sync straight after the run before (a new spare subject process starting) against 15 s after it; (2) the sweep
# with 15 s between runs and straight after one; (3) the hostile kernels under every timer
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
{ nvidia-smi topo -m; lscpu | head -30; } > "$LOGS/topo.txt" 2>&1
SW=configs/timex-sweep.toml
cudabench build --kernels-dir tests/hostile_kernels --kernel hostile > "$LOGS/build-hostile.log" 2>&1 &
step build-add2 cudabench build -k add2
step build-timex cudabench build -k timex; wait
step sweep-warm cudabench run --config $SW
step add2-b2b-1 cudabench run --config configs/add2.toml --timing sync --json "$LOGS/add2-b2b-1.json"
step add2-b2b-2 cudabench run --config configs/add2.toml --timing sync --json "$LOGS/add2-b2b-2.json"
sleep 15
step add2-idle-1 cudabench run --config configs/add2.toml --timing sync --json "$LOGS/add2-idle-1.json"
sleep 15
step add2-idle-2 cudabench run --config configs/add2.toml --timing sync --json "$LOGS/add2-idle-2.json"
for i in 1 2 3; do
  sleep 15
  step "sweep-idle-$i" cudabench run --config $SW --json "$LOGS/sweep-idle-$i.json"
done
step sweep-b2b cudabench run --config $SW --json "$LOGS/sweep-b2b.json"
cudabench compare "$LOGS/add2-b2b-1.json" "$LOGS/add2-b2b-2.json" > "$LOGS/compare-add2-b2b.txt" 2>&1
cudabench compare "$LOGS/add2-idle-1.json" "$LOGS/add2-idle-2.json" > "$LOGS/compare-add2-idle.txt" 2>&1
cudabench compare "$LOGS/add2-b2b-1.json" "$LOGS/add2-idle-1.json" > "$LOGS/compare-add2-b2b-idle.txt" 2>&1
cudabench workers --stop > /dev/null 2>&1
step pytest-attacks python3 -m pytest -m gpu -rA -q tests/gpu/test_integrity_gpu.py -k "every_misbehaviour or crashes_and_hangs"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/sweep-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-260)"; done
for f in "$LOGS"/compare-*.txt; do echo "== $(basename $f): $(grep -cE 'same' $f) same, $(grep -cE 'slower|faster' $f) apart"; done
grep -h -E "^(FAILED|ERROR)|passed|failed" "$LOGS"/pytest-*.log | tail -5
