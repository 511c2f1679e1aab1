#!/usr/bin/env bash
# session 24 call D (x1): the last commits that touch GPU code (b234fbe's stream-order probe, 2730c54's hostile
# kernel) verified: the hostile kernels under every timer, crashes and hangs, then the run GPU tests
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
cudabench build --kernels-dir tests/hostile_kernels --kernel hostile > "$LOGS/build-hostile.log" 2>&1 &
step build build_all; wait
step pytest-attacks python3 -m pytest -m gpu -rA -q tests/gpu/test_integrity_gpu.py -k "every_misbehaviour or crashes_and_hangs or state_left_behind"
step pytest-run python3 -m pytest -m gpu -rA -q tests/gpu/test_run_gpu.py
printf '  %s\n' "${SUMMARY[@]}"
grep -h -E "^(FAILED|ERROR)|passed|failed" "$LOGS"/pytest-*.log | tail -8
