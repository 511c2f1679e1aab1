#!/usr/bin/env bash
# session 25 call B (x1): cuFFT first plans at random shapes (2T against a power of two); the sweep at f30ca3e
# (before) and the working tree (after: a power-of-two reference, the state guard's quick check) alternating;
# a traced sweep (no cProfile) of the after tree; the integrity GPU tests the state guard touches
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
for s in 1 2; do for m in 2T pow2; do python3 .ci/sessions/probe25_fft_plans.py $m $s >> "$LOGS/probe-fft.txt" 2>&1; done; done
grep seed "$LOGS/probe-fft.txt"
rm -rf /tmp/before && mkdir -p /tmp/before && tar xf scratch/before25.tar -C /tmp/before
mkdir -m 700 -p /tmp/xdg-before /tmp/xdg-after
SW=configs/timex-sweep.toml
before() { env PYTHONPATH=/tmp/before:${PYTHONPATH:-} XDG_RUNTIME_DIR=/tmp/xdg-before bash -c "cd /tmp/before && python3 -m cudabench $*"; }
after() { env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench "$@"; }
step build cudabench build -k timex
step warm-before-one before run --config $SW
step warm-after-one after run --config $SW
for i in 1 2; do
  step "scale-before-one-$i" before run --config $SW --json "$LOGS/before-one-$i.json"
  step "scale-after-one-$i" after run --config $SW --json "$LOGS/timex-sweep-one-$i.json"
done
after compare "$LOGS/before-one-1.json" "$LOGS/timex-sweep-one-1.json" > "$LOGS/compare-before-after-1.txt" 2>&1
after compare "$LOGS/before-one-2.json" "$LOGS/timex-sweep-one-2.json" > "$LOGS/compare-before-after-2.txt" 2>&1
env XDG_RUNTIME_DIR=/tmp/xdg-before cudabench workers --stop > /dev/null 2>&1
T=$LOGS/trace-one; mkdir -p "$T"
export CB_TRACE=$T PYTHONPATH=$PWD/.ci/harness_trace:${PYTHONPATH:-}
step traced-one-warm after run --config $SW
rm -f "$T"/*
step traced-one after run --config $SW
env XDG_RUNTIME_DIR=/tmp/xdg-after cudabench workers --stop > /dev/null 2>&1; sleep 2
unset CB_TRACE
export PYTHONPATH=${PYTHONPATH#$PWD/.ci/harness_trace:}
python3 .ci/harness_trace/report.py "$T" > "$LOGS/trace-report-one.txt" 2>&1
step gpu-integrity timeout 200 python3 -m pytest -m gpu -q -x tests/gpu/test_integrity_gpu.py -k "every_misbehaviour or state_left_behind"
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log "$LOGS"/traced-one.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-230)"; done
for f in "$LOGS"/compare-*.txt; do echo "== $(basename $f): $(grep -cE '│ same' $f) same, $(grep -cE '│ (slower|faster)' $f) apart"; done
tail -3 "$LOGS/gpu-integrity.log"
head -70 "$LOGS/trace-report-one.txt"
