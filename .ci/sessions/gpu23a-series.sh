#!/usr/bin/env bash
# session 23 call A (x2): issue 28's sweep at HEAD (one GPU, all GPUs, alternating), then traced and cProfiled
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
step build cudabench build -k timex
step warm-one cudabench run --config configs/timex-sweep.toml
step warm-all cudabench run --config configs/timex-sweep.toml --gpus all
for i in 1 2; do
  step "scale-timex-sweep-one-$i" cudabench run --config configs/timex-sweep.toml --json "$LOGS/timex-sweep-one-$i.json"
  step "scale-timex-sweep-all-$i" cudabench run --config configs/timex-sweep.toml --gpus all --json "$LOGS/timex-sweep-all-$i.json"
done
python3 .ci/scale_report.py "$LOGS" > "$LOGS/scale-report.md" 2>&1
# traced: new warm workers (PYTHONPATH is part of their key), a first sweep to warm them, then the traced ones
cudabench workers --stop > /dev/null 2>&1
for mode in one all; do
  T=$LOGS/trace-$mode; mkdir -p "$T"
  args=(); [ $mode = all ] && args=(--gpus all)
  export CB_TRACE=$T CB_PROFILE=1 PYTHONPATH=$PWD/.ci/harness_trace:${PYTHONPATH:-}
  step "traced-$mode-warm" cudabench run --config configs/timex-sweep.toml "${args[@]}"
  rm -f "$T"/*
  step "traced-$mode" cudabench run --config configs/timex-sweep.toml "${args[@]}"
  cudabench workers --stop > /dev/null 2>&1; sleep 3
  unset CB_TRACE CB_PROFILE
  export PYTHONPATH=${PYTHONPATH#$PWD/.ci/harness_trace:}
  python3 .ci/harness_trace/report.py "$T" > "$LOGS/trace-report-$mode.txt" 2>&1
done
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/scale-*.log "$LOGS"/traced-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-300)"; done
sed -n 1,24p "$LOGS/scale-report.md"
head -45 "$LOGS/trace-report-one.txt"
