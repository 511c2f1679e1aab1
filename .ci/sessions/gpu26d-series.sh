#!/usr/bin/env bash
# session 26 call D (x2, 3e78111: four of six new draws read, hostile-partial-skip, review fixes): every attack
# class under the four timers, two timers at a time
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
T0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build cudabench build --kernels-dir tests/hostile_kernels --kernel hostile
echo "built at $(( $(date +%s) - T0 )) s"
mkdir -m 700 -p /tmp/xdg0 /tmp/xdg1
( export CUDA_VISIBLE_DEVICES=0 XDG_RUNTIME_DIR=/tmp/xdg0
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class and (events or cupti)" > "$LOGS/pytest-attacks-a.log" 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 XDG_RUNTIME_DIR=/tmp/xdg1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class and (sync or graph)" > "$LOGS/pytest-attacks-b.log" 2>&1 ) &
wait
echo "tests done at $(( $(date +%s) - T0 )) s"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename $f)"; grep -h -E "^(FAILED|ERROR|PASSED)|^=+ .*(passed|failed|error)|^E  " "$f" | head -12; done
