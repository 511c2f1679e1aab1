#!/usr/bin/env bash
# session 28 call C (x2, the last commit that touches GPU code): integrity halves on GPU 0 and 1, warm-worker tests
# (the spare's context among them) and clocks on GPU 0; on GPU 1 direct-sum timex on constant inputs at T=1024,
# back-to-back warm timex-v4 runs and the sweep; then the sweep on both GPUs
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
T0=$(date +%s)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
step build build_all
echo "built at $(( $(date +%s) - T0 )) s"
mkdir -m 700 -p /tmp/xdg0 /tmp/xdg1 /tmp/xdg2
SW=configs/timex-sweep.toml
( export CUDA_VISIBLE_DEVICES=0 XDG_RUNTIME_DIR=/tmp/xdg0
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_misbehaviour or graph_calls or impossible or crashes" > "$LOGS/pytest-integrity-a.log" 2>&1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_warm_gpu.py > "$LOGS/pytest-warm.log" 2>&1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_timing_truth.py tests/gpu/test_api_gpu.py -k "clock" > "$LOGS/pytest-clocks.log" 2>&1 ) &
( export CUDA_VISIBLE_DEVICES=1 XDG_RUNTIME_DIR=/tmp/xdg1
  python3 -m pytest -m gpu -rA -p no:cacheprovider tests/gpu/test_integrity_gpu.py -k "every_attack_class or tuned or state_left or cli_run or no_integrity or memory" > "$LOGS/pytest-integrity-b.log" 2>&1
  for seed in 1 2 3; do
    cudabench run -k timex-v1,timex-v2,timex-v3,timex-v4,timex-v5 --no-baseline --shape B=32,C=768,T=1024 --inputs constant --seed $seed --repeat 50 --json "$LOGS/constant-$seed.json" > "$LOGS/constant-$seed.log" 2>&1
  done
  cudabench run --config $SW > "$LOGS/sweep-warm.log" 2>&1
  cudabench run --config $SW --json "$LOGS/sweep-1.json" > "$LOGS/sweep-1.log" 2>&1
  cudabench run --config $SW --json "$LOGS/sweep-2.json" > "$LOGS/sweep-2.log" 2>&1
  for i in 1 2 3; do /usr/bin/time -f "%e s from the shell" cudabench run -k timex-v4 > "$LOGS/timex-v4-$i.log" 2>&1; done ) &
wait
echo "tests done at $(( $(date +%s) - T0 )) s"
( export XDG_RUNTIME_DIR=/tmp/xdg2
  cudabench run --config $SW --gpus all > "$LOGS/two-warm.log" 2>&1
  for i in 1 2; do cudabench run --config $SW --gpus all --json "$LOGS/two-$i.json" > "$LOGS/two-$i.log" 2>&1; done )
echo "all done at $(( $(date +%s) - T0 )) s"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/pytest-*.log; do echo "== $(basename $f)"; grep -h -E "^(FAILED|ERROR)|^=+ .*(passed|failed|error)" "$f" | tail -8; done
python3 - "$LOGS" <<'PY'
import json, sys, glob
for path in sorted(glob.glob(sys.argv[1] + "/constant-*.json")):
    rows = [(r["subject"], r["status"], r["check"]["worst"] if r.get("check") else None, r["check"]["tolerance"] if r.get("check") else None)
            for r in json.load(open(path))["results"]]
    print(path.split("/")[-1], "; ".join(f"{s} {st} err {e:.2e} tol {t:.1e}" if e is not None else f"{s} {st}" for s, st, e, t in rows))
PY
for f in "$LOGS"/sweep-[12].log "$LOGS"/two-[12].log "$LOGS"/timex-v4-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-230) $(grep -h 'from the shell' $f)"; done
