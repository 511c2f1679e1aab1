"""Comparing two runs: noise-aware verdicts per subject."""
