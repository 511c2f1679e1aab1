#!/usr/bin/env bash
# session 24 call A (x1): at 095e069, (1) the sweep straight after the run before (the new spare subject process
# still starting) against 20 s after it (the spare ready and idle); (2) warm-up 25 ms against 10 ms on short sync
# calls (add2), attention fwd/fwdbwd bf16 and matmul; (3) the warm-worker GPU tests owed since 84a07c0
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
SW=configs/timex-sweep.toml
step build build_all
step sweep-warm cudabench run --config $SW
step b2b-1 cudabench run --config $SW --json "$LOGS/b2b-1.json"
step b2b-2 cudabench run --config $SW --json "$LOGS/b2b-2.json"
sleep 20
step idle-1 cudabench run --config $SW --json "$LOGS/idle-1.json"
sleep 20
step idle-2 cudabench run --config $SW --json "$LOGS/idle-2.json"
ATT="-k attn-flash2,attn-flash3 -b sdpa-flash,sdpa-cudnn --dtype bfloat16 -d fwd -d fwdbwd --shape B=4,H=16,N=2048,D=128,causal=1 --timing events"
MM="-k matmul-regtile -b torch-matmul --shape M=1024,N=1024,K=1024 --shape M=4096,N=4096,K=4096"
for i in 1 2; do
  for w in 25ms 10ms; do
    step "add2-$w-$i" cudabench run --config configs/add2.toml --timing sync --warmup $w --json "$LOGS/add2-$w-$i.json"
    step "attn-$w-$i" cudabench run $ATT --warmup $w --json "$LOGS/attn-$w-$i.json"
    step "mm-$w-$i" cudabench run $MM --warmup $w --json "$LOGS/mm-$w-$i.json"
  done
done
for k in add2 attn mm; do
  for i in 1 2; do cudabench compare "$LOGS/$k-25ms-$i.json" "$LOGS/$k-10ms-$i.json" > "$LOGS/compare-$k-25-10-$i.txt" 2>&1; done
  cudabench compare "$LOGS/$k-25ms-1.json" "$LOGS/$k-25ms-2.json" > "$LOGS/compare-$k-25-25.txt" 2>&1
  cudabench compare "$LOGS/$k-10ms-1.json" "$LOGS/$k-10ms-2.json" > "$LOGS/compare-$k-10-10.txt" 2>&1
done
cudabench compare "$LOGS/b2b-1.json" "$LOGS/idle-1.json" > "$LOGS/compare-b2b-idle.txt" 2>&1
cudabench workers --stop > /dev/null 2>&1
step pytest-warm python3 -m pytest -m gpu -rA -q tests/gpu/test_warm_gpu.py
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/b2b-*.log "$LOGS"/idle-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-260)"; done
for f in "$LOGS"/compare-*.txt; do echo "== $(basename $f): $(tail -3 "$f" | tr '\n' ' ' | cut -c1-300)"; done
grep -h -E "^(FAILED|ERROR)|passed|failed" "$LOGS"/pytest-*.log | tail -5
