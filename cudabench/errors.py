"""Error types that carry a hint for the user. Only the CLI prints them and picks the exit code."""

from __future__ import annotations

# Exit codes: 1 = something ran and failed (a build, a correctness check);
# 2 = the request cannot be run as asked (usage, configuration, missing GPU or tool).
EXIT_FAILED = 1
EXIT_USAGE = 2


class CudabenchError(Exception):
    """A problem the user can act on: a message, an optional hint and an exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        """The message and its hint: what a Python caller (a script, pytest) sees of the error. The CLI
        prints the two apart."""
        return f"{self.message}\nhint: {self.hint}" if self.hint else self.message


class UncleanProcess(RuntimeError):
    """A subject process that cannot serve the next subject for what came before it (a state it could not
    restore, threads that earlier code left running): the judge opens that subject again in a fresh one."""


class UnknownKernelError(CudabenchError):
    pass


class ShapeError(CudabenchError):
    """A --shape that does not parse, names an unknown parameter or breaks a kernel's constraint."""


class ConfigError(CudabenchError):
    pass


class NoGPUError(CudabenchError):
    pass


class ToolNotFoundError(CudabenchError):
    pass


class NotOnThisGPUError(CudabenchError):
    """A variant that needs another GPU (e.g. sm_90a instructions): skipped here, not failed."""


class BuildError(CudabenchError):
    """The compiler rejected a kernel's sources; the message holds the compiler's own error lines."""

    exit_code = EXIT_FAILED


class CheckFailedError(CudabenchError):
    exit_code = EXIT_FAILED


class RunFailedError(CudabenchError):
    """A run that ended without what it was asked for (a results file)."""

    exit_code = EXIT_FAILED


NO_GPU_HINT = (
    "Still works without a GPU: `cudabench list`, `cudabench doctor`, "
    "`cudabench build --check --all --arch sm_90` (compile-only with nvcc)."
)
