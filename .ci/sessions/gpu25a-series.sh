#!/usr/bin/env bash
# session 25 call A (x1): the sweep at HEAD twice, then traced and cProfiled on one GPU
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
SW=configs/timex-sweep.toml
step build cudabench build -k timex
step warm-one cudabench run --config $SW
for i in 1 2; do step "scale-timex-sweep-one-$i" cudabench run --config $SW --json "$LOGS/timex-sweep-one-$i.json"; done
cudabench workers --stop > /dev/null 2>&1
T=$LOGS/trace-one; mkdir -p "$T"
export CB_TRACE=$T CB_PROFILE=1 PYTHONPATH=$PWD/.ci/harness_trace:${PYTHONPATH:-}
step traced-one-warm cudabench run --config $SW
rm -f "$T"/*
step traced-one cudabench run --config $SW
cudabench workers --stop > /dev/null 2>&1; sleep 3
unset CB_TRACE CB_PROFILE
export PYTHONPATH=${PYTHONPATH#$PWD/.ci/harness_trace:}
python3 .ci/harness_trace/report.py "$T" > "$LOGS/trace-report-one.txt" 2>&1
python3 scratch/pstats_top.py "$T" > "$LOGS/pstats-top.txt" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log "$LOGS"/traced-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-300)"; done
head -50 "$LOGS/trace-report-one.txt"
