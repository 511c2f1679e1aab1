#!/usr/bin/env bash
# session 32 call C (x2): the rest of the GPU tests at the session's final code (call B ran the attack matrix and
# the warm-worker tests): integrity's misbehaviours under every timer, graph calls, impossible figures, crashes
# and hangs (processes replaced, the judge's thread ledger dropped with them), the clock readings; the
# tuned-kernel, state-left, CLI run, no-integrity and memory tests; honest runs of sincos and matmul
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
t0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build build_all
echo "built at $(( $(date +%s) - t0 )) s"
T=tests/gpu/test_integrity_gpu.py
P="python3 -m pytest -m gpu -rA -p no:cacheprovider --durations=0"
mkdir -m 700 -p /tmp/xdg0 /tmp/xdg1
( export CUDA_VISIBLE_DEVICES=0 XDG_RUNTIME_DIR=/tmp/xdg0
  $P $T -k "every_misbehaviour or graph_calls or impossible or crashes" > "$LOGS/pytest-integrity-a.log" 2>&1
  $P tests/gpu/test_timing_truth.py tests/gpu/test_api_gpu.py -k "clock" > "$LOGS/pytest-clocks.log" 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 XDG_RUNTIME_DIR=/tmp/xdg1
  $P $T -k "tuned or state_left or cli_run or no_integrity or memory" > "$LOGS/pytest-integrity-b.log" 2>&1
  cudabench run -k sincos --shape n=4194304 --json "$LOGS/honest-sincos.json" > "$LOGS/honest-sincos.log" 2>&1
  cudabench run -k matmul --shape M=1024,N=1024,K=1024 --json "$LOGS/honest-matmul.json" > "$LOGS/honest-matmul.log" 2>&1 ) &
wait
echo "tests done at $(( $(date +%s) - t0 )) s"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename "$f")"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)" "$f" | tail -8; done
python3 .ci/sessions/honest_summary.py "$LOGS"
