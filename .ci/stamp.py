"""Prefix each line of standard input with the seconds since start: where a command spends its time."""
import sys
import time

t0 = time.monotonic()
for line in sys.stdin:
    sys.stdout.write(f"{time.monotonic() - t0:7.2f} {line}")
    sys.stdout.flush()
