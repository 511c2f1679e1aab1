#!/usr/bin/env bash
# session 23 call D (x1): the last commit that touches GPU code (84a07c0) verified: the run and warm-worker GPU
# tests, then the sweep on one GPU (warm)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
cudabench build --kernels-dir tests/hostile_kernels --kernel hostile > "$LOGS/build-hostile.log" 2>&1 &
step build build_all; wait
step pytest-run python3 -m pytest -m gpu -rA -q tests/gpu/test_run_gpu.py
step pytest-warm python3 -m pytest -m gpu -rA -q tests/gpu/test_warm_gpu.py
step sweep-warm cudabench run --config configs/timex-sweep.toml
step sweep-one cudabench run --config configs/timex-sweep.toml --json "$LOGS/sweep-one.json"
printf '  %s\n' "${SUMMARY[@]}"
grep -h -E "^(FAILED|ERROR)|passed|failed" "$LOGS"/pytest-*.log | tail -8
for f in "$LOGS"/sweep-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-220)"; done
grep -c "│ *ok\|ok " "$LOGS/sweep-one.log"; grep -E "INVALID|ERROR" "$LOGS/sweep-one.log" | head -3
