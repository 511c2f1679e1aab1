#!/usr/bin/env bash
# session 25 call D (x2, 239fded, the last commit that touches GPU code): the GPU tests the session's changes
# touch, two at a time (integrity and timex's kernels on GPU 0; warm workers and run on GPU 1); then the sweep
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
T0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build build_all
mkdir -m 700 -p /tmp/xdg0 /tmp/xdg1 /tmp/xdg2
( export CUDA_VISIBLE_DEVICES=0 XDG_RUNTIME_DIR=/tmp/xdg0
  python3 -m pytest -m gpu -rA tests/gpu/test_integrity_gpu.py > "$LOGS/pytest-integrity.log" 2>&1
  python3 -m pytest -m gpu -q tests/gpu/test_kernels.py -k timex > "$LOGS/pytest-timex.log" 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 XDG_RUNTIME_DIR=/tmp/xdg1
  python3 -m pytest -m gpu -rA tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1
  python3 -m pytest -m gpu -rA tests/gpu/test_run_gpu.py > "$LOGS/pytest-run.log" 2>&1 ) &
wait
echo "tests done at $(( $(date +%s) - T0 )) s"
SW=configs/timex-sweep.toml
if [ $(( $(date +%s) - T0 )) -lt 430 ]; then
  export XDG_RUNTIME_DIR=/tmp/xdg2
  step warm-one cudabench run --config $SW
  step scale-timex-sweep-one-1 cudabench run --config $SW --json "$LOGS/timex-sweep-one-1.json"
  step warm-all cudabench run --config $SW --gpus all
  step scale-timex-sweep-all-1 cudabench run --config $SW --gpus all --json "$LOGS/timex-sweep-all-1.json"
fi
printf '  %s\n' "${SUMMARY[@]}"
grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed)|passed|failed" "$LOGS"/pytest-*.log | tail -12
for f in "$LOGS"/scale-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-200)"; done
