"""A user's own package with ops, for tests of cudabench.bench and `cudabench run --op`."""
