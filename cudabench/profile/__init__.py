"""Profilers: Nsight Systems, Nsight Compute and torch.profiler launchers, tool discovery and report
readers."""
