#!/usr/bin/env bash
# session 23 call C (x2): a traced sweep on one GPU and on two (the timeline of a run's fixed costs), then the
# GPU tests the requests sent ahead touch: crashes, hangs and every attack class in a run, the run tests
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
SWEEP=configs/timex-sweep.toml
cudabench build --kernels-dir tests/hostile_kernels --kernel hostile > "$LOGS/build-hostile.log" 2>&1 &
step build cudabench build -k timex; wait
export CB_TRACE=$LOGS/trace PYTHONPATH=$PWD/.ci/harness_trace:${PYTHONPATH:-}; mkdir -p "$CB_TRACE"
step traced-warm-one cudabench run --config $SWEEP
step traced-warm-all cudabench run --config $SWEEP --gpus all
step traced-one cudabench run --config $SWEEP --json "$LOGS/traced-one.json"
step traced-all cudabench run --config $SWEEP --gpus all --json "$LOGS/traced-all.json"
step traced-all-2 cudabench run --config $SWEEP --gpus all --json "$LOGS/traced-all-2.json"
cudabench workers --stop > /dev/null 2>&1; sleep 3
unset CB_TRACE; export PYTHONPATH=${PYTHONPATH#$PWD/.ci/harness_trace:}
step pytest-integrity python3 -m pytest -m gpu -rA -q tests/gpu/test_integrity_gpu.py -k "every_attack or crashes or cli_run"
step pytest-run python3 -m pytest -m gpu -rA -q tests/gpu/test_run_gpu.py
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/traced-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-200)"; done
python3 scratch/timeline.py "$LOGS/trace" 2>&1 | tail -40
grep -h -E "^(FAILED|ERROR)|passed|failed" "$LOGS"/pytest-*.log | tail -8
