#!/usr/bin/env bash
# session 28 call B (x2): host topology; matmul-regtile layout variants (.ci/probes/sgemm_layouts.cu) and ncu's
# stall reasons; the timex sweep on GPU 0 with its processes free and pinned to GPU 0's local CPUs
source <(sed -n "1,/^steps=/p" .ci/gpu | head -n -1)
git log --oneline -1 > "$LOGS/head.txt" 2>/dev/null
export CUDA_VISIBLE_DEVICES=0
{ nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader; nvidia-smi topo -m; lscpu | grep -i -E "numa|^cpu\(s\)|model name|socket"; } > "$LOGS/topo.txt" 2>&1
BUS=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 | tr 'A-F' 'a-f' | sed 's/^0000//')
LOCAL=$(cat /sys/bus/pci/devices/$BUS/local_cpulist 2>/dev/null || echo "")
echo "GPU0 bus $BUS local cpus: $LOCAL" | tee -a "$LOGS/topo.txt"
step nvcc-sgemm nvcc -arch=sm_90 -O3 -Xptxas -v -o /tmp/sgemm2 .ci/probes/sgemm_layouts.cu
step sgemm-layouts /tmp/sgemm2
step sgemm-cublas python3 .ci/probes/sgemm_cublas.py
step sgemm-layouts-2 /tmp/sgemm2
step ncu-sgemm timeout 150 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" -k "regex:matmul_regtile|tile" /tmp/sgemm2 once
step build cudabench build -k timex
SW=configs/timex-sweep.toml
export XDG_RUNTIME_DIR=/tmp/xdg-b; mkdir -m 700 -p $XDG_RUNTIME_DIR
sweeps() {  # sweeps TAG PREFIX...: a warm-up run, then two runs
  local tag=$1; shift
  "$@" cudabench run --config $SW > "$LOGS/warm-$tag.log" 2>&1
  for i in 1 2; do step "scale-$tag-$i" "$@" cudabench run --config $SW --json "$LOGS/sweep-$tag-$i.json"; done
  cudabench workers --stop > /dev/null 2>&1; sleep 2
}
sweeps free
[ -n "$LOCAL" ] && sweeps pinned taskset -c "$LOCAL"
sweeps free2
[ -n "$LOCAL" ] && sweeps pinned2 taskset -c "$LOCAL"
printf '  %s\n' "${SUMMARY[@]}"
cat "$LOGS/topo.txt" | tail -12
grep -h "TFLOP" "$LOGS/sgemm-layouts.log" "$LOGS/sgemm-cublas.log" "$LOGS/sgemm-layouts-2.log"
python3 .ci/sessions/ncu_stalls.py "$LOGS/ncu-sgemm.log"
for f in "$LOGS"/scale-*.log; do echo "$(basename $f): $(grep -h '^time:' -A1 $f | tr '\n' ' ' | cut -c1-200)"; done
