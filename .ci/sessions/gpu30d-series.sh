#!/usr/bin/env bash
# session 30 call D (one H200): the GPU tests after the process hooks, second part: the warm-worker tests (cut from
# call C by its time limit) and integrity's first half (crashes, hangs, process replacement, graph calls,
# impossible figures). The clock readings' tests are left out: no clock code changed, and the device time ran out
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
step build build_all
export XDG_RUNTIME_DIR=/tmp/xdg0; mkdir -m 700 -p $XDG_RUNTIME_DIR
python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1
python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_misbehaviour or graph_calls or impossible or crashes" > "$LOGS/pytest-integrity-a.log" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename "$f")"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)" "$f" | tail -8; done
