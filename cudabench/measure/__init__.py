"""Measurement, inside a worker: timers, stop rules, warm-up, L2 flush, clocks, ceilings, the
correctness check and the integrity checks."""
