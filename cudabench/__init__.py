"""cudabench: build, check, time and profile custom CUDA operators for PyTorch."""

__version__ = "0.1.0"
