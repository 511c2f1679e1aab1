"""Summarise ncu's text output: per kernel, issue slots busy, warp cycles per issued instruction, and the
stall reasons above 0.05 cycles per issued instruction."""
import re, sys
kernel, rows = None, {}
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s+(\S.*?)\s+\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m:
        kernel = m.group(1)[:60] + f" #{len(rows)}"
        rows[kernel] = []
        continue
    if kernel is None:
        continue
    m = re.match(r"\s+(smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio)\s+\S+\s+([\d.]+)", line)
    if m and float(m.group(3)) >= 0.05:
        rows[kernel].append(f"{m.group(2)} {float(m.group(3)):.2f}")
    m = re.match(r"\s+(Issue Slots Busy|Warp Cycles Per Issued Instruction|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Compute \(SM\) Throughput)\s+\S+\s+([\d.]+)", line)
    if m:
        rows[kernel].append(f"{m.group(1)}={m.group(2)}")
for k, v in rows.items():
    print(k, "|", "; ".join(v))
