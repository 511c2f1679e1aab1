#!/usr/bin/env bash
# session 29 call C (x2, bb48ab1: the last commit that touches GPU code): integrity halves on GPU 0 and 1, warm
# workers and the clock readings' tests on GPU 0, the timing-truth tests that use CUPTI on GPU 1
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
T0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build build_all
echo "built at $(( $(date +%s) - T0 )) s"
mkdir -m 700 -p /tmp/xdg0 /tmp/xdg1
( export CUDA_VISIBLE_DEVICES=0 XDG_RUNTIME_DIR=/tmp/xdg0
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_misbehaviour or graph_calls or impossible or crashes" > "$LOGS/pytest-integrity-a.log" 2>&1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_timing_truth.py tests/gpu/test_api_gpu.py -k "clock" > "$LOGS/pytest-clocks.log" 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 XDG_RUNTIME_DIR=/tmp/xdg1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class or tuned or state_left or cli_run or no_integrity or memory" > "$LOGS/pytest-integrity-b.log" 2>&1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_timing_truth.py -k "cupti or short_kernel or every_timing_mode" > "$LOGS/pytest-cupti.log" 2>&1 ) &
wait
echo "tests done at $(( $(date +%s) - T0 )) s"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename $f)"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)" "$f" | tail -8; done
