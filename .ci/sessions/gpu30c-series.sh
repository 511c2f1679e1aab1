#!/usr/bin/env bash
# session 30 call C (one H200; two were not lent): the GPU tests after the process hooks, first part: the attack
# matrix (with hostile-signal-timer and hostile-finalizer) and the rest of integrity's second half, then the
# warm-worker tests (a hostile subject, then an honest one in a later invocation)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
step build build_all
export XDG_RUNTIME_DIR=/tmp/xdg0; mkdir -m 700 -p $XDG_RUNTIME_DIR
python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class or tuned or state_left or cli_run or no_integrity or memory" > "$LOGS/pytest-integrity-b.log" 2>&1
python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename "$f")"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)" "$f" | tail -8; done
