#!/usr/bin/env bash
# session 29 call A (x1, ed45ad2): the sweep twice, then traced with the CUPTI pass's steps (session start,
# calls, end, reading) and the event timer's preparation among the spans
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
source .ci/trace-sweep
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
SW=configs/timex-sweep.toml
export XDG_RUNTIME_DIR=/tmp/xdg-a; mkdir -m 700 -p $XDG_RUNTIME_DIR
step build cudabench build -k timex
step warm-one cudabench run --config $SW
for i in 1 2; do step "scale-timex-sweep-one-$i" cudabench run --config $SW --json "$LOGS/timex-sweep-one-$i.json"; done
cudabench workers --stop > /dev/null 2>&1
trace_sweep $SW
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log "$LOGS"/traced-one.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-330)"; done
head -75 "$LOGS/trace-report-one.txt"
