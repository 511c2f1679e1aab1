"""cudabench: build, check, time and profile custom CUDA operators for PyTorch.

From Python: `cudabench.bench(...)` (see cudabench.api) returns `cudabench.Results`; its mistakes are
`cudabench.CudabenchError`, and `cudabench.NoGPUError` where no GPU is usable."""

__version__ = "0.1.0"

_LAZY = {"bench": "cudabench.api", "Results": "cudabench.api", "ResultsError": "cudabench.api",
         "CudabenchError": "cudabench.errors", "NoGPUError": "cudabench.errors"}


def __getattr__(name: str):
    """The Python API, imported at first use: `import cudabench` stays as light as the command line needs."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cudabench' has no attribute {name!r}")
