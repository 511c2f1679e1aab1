#!/usr/bin/env bash
# session 32 call B (x2): the GPU tests the threads' new reading touches most (known threads by id and start time,
# read after the restore, by the subject process and by the judge from outside; an open after unknown threads in a
# fresh process; the registry's objects and the thread watch watched; the hello's CPU team on autograd's thread):
#   0: the attack matrix under sync and events, then honest runs of timex (the sweep) and attention
#   1: the attack matrix under graph and cupti, then the warm-worker tests
# (hostile-native-thread, -late-thread, -take-threads, -skip-thread are in the matrix); call C has the rest
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
  $P $T -k "every_attack_class and (sync or events)" > "$LOGS/pytest-matrix-a.log" 2>&1
  cudabench run --config configs/timex-sweep.toml --json "$LOGS/honest-timex.json" > "$LOGS/honest-timex.log" 2>&1
  cudabench run -k attention --dtype bfloat16 --shape B=2,H=4,N=512,D=64,causal=1 -d fwdbwd --json "$LOGS/honest-attention.json" > "$LOGS/honest-attention.log" 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 XDG_RUNTIME_DIR=/tmp/xdg1
  $P $T -k "every_attack_class and (graph or cupti)" > "$LOGS/pytest-matrix-b.log" 2>&1
  $P tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1 ) &
wait
echo "tests done at $(( $(date +%s) - t0 )) s"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename "$f")"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)" "$f" | tail -8; done
python3 .ci/sessions/honest_summary.py "$LOGS"
for f in "$LOGS"/honest-*.log; do tail -3 "$f"; done
