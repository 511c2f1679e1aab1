#!/usr/bin/env bash
# session 27 call A (x1, 542cfe9): the CUPTI pass's parts; the sweep twice, then traced (no cProfile)
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
SW=configs/timex-sweep.toml
export XDG_RUNTIME_DIR=/tmp/xdg-a; mkdir -m 700 -p $XDG_RUNTIME_DIR
step build cudabench build -k timex
step probe-cupti python3 .ci/sessions/probe27_cupti.py
step warm-one cudabench run --config $SW
for i in 1 2; do step "scale-timex-sweep-one-$i" cudabench run --config $SW --json "$LOGS/timex-sweep-one-$i.json"; done
cudabench workers --stop > /dev/null 2>&1
T=$LOGS/trace-one; mkdir -p "$T"
export CB_TRACE=$T PYTHONPATH=$PWD/.ci/harness_trace:${PYTHONPATH:-}
step traced-one-warm cudabench run --config $SW
rm -f "$T"/*
step traced-one cudabench run --config $SW --json "$LOGS/traced.json"
cudabench workers --stop > /dev/null 2>&1; sleep 3
unset CB_TRACE
export PYTHONPATH=${PYTHONPATH#$PWD/.ci/harness_trace:}
python3 .ci/harness_trace/report.py "$T" > "$LOGS/trace-report-one.txt" 2>&1
printf '  %s\n' "${SUMMARY[@]}"
cat "$LOGS/probe-cupti.log"
for f in "$LOGS"/scale-*.log "$LOGS"/traced-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-330)"; done
head -60 "$LOGS/trace-report-one.txt"
