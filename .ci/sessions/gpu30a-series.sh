#!/usr/bin/env bash
# session 30 call A (one GPU): does a warm worker slow down run by run (the twenty-ninth session's call F)?
# Five warm sweeps back to back, one --no-warm sweep, then the workers stopped and three warm sweeps on fresh
# ones; after each run the warm processes' threads, fds, memory and children, and the GPU's state.
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$LOGS/gpus.txt"
step build cudabench build -k timex
SW=configs/timex-sweep.toml
export XDG_RUNTIME_DIR=/tmp/xdg-a; mkdir -m 700 -p $XDG_RUNTIME_DIR
snapshot() {  # NAME: the warm processes and the GPU after a run
  {
    echo "== $1 $(date +%T)"
    for pid in $(pgrep -f "cudabench.engine.(warm|worker|subject_worker)"); do
      [ -d /proc/$pid ] || continue
      printf '%s pid %s ppid %s threads %s fds %s rss_kb %s age_s %s\n' \
        "$(tr '\0' ' ' < /proc/$pid/cmdline | grep -o 'cudabench.engine.[a-z_]*\( --spare\)\?')" "$pid" \
        "$(awk '{print $4}' /proc/$pid/stat)" "$(ls /proc/$pid/task | wc -l)" "$(ls /proc/$pid/fd | wc -l)" \
        "$(awk '/VmRSS/{print $2}' /proc/$pid/status)" "$(ps -o etimes= -p $pid | tr -d ' ')"
    done
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
    nvidia-smi --query-gpu=temperature.gpu,clocks.sm,clocks.mem,power.draw,clocks_throttle_reasons.active --format=csv,noheader
  } >> "$LOGS/state.txt" 2>&1
}
run_sweep() {  # NAME [ARGS]
  local name=$1; shift
  step "$name" cudabench run --config $SW --json "$LOGS/$name.json" "$@"
  snapshot "$name"
}
cudabench run --config $SW > "$LOGS/warm-start.log" 2>&1; snapshot warm-start
for i in 1 2 3 4 5; do run_sweep "warm-$i"; done
run_sweep nowarm-1 --no-warm
cudabench workers --stop > /dev/null 2>&1
cudabench run --config $SW > "$LOGS/warm-restart.log" 2>&1; snapshot warm-restart
for i in 6 7 8; do run_sweep "warm-$i"; done
cudabench workers --stop > /dev/null 2>&1
printf '  %s\n' "${SUMMARY[@]}"
for f in "$LOGS"/warm-[0-9]*.log "$LOGS"/nowarm-1.log; do echo "$(basename "$f"): $(grep -h '^time:' -A1 "$f" | tr '\n' ' ' | cut -c1-230)"; done
grep -E "^==|engine" "$LOGS/state.txt" | awk '{print $1,$2,$3,$6,$7,$8,$9,$10,$11,$12,$13}' | tail -60
