"""Where the code that ran came from: the git work tree's commit, and whether it had changes."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class Provenance:
    """Where the code that ran came from: the work tree's commit and whether it had changes."""

    commit: str
    dirty: bool

    @staticmethod
    def here(cwd: Optional[Path] = None) -> "Provenance":
        cwd = cwd or Path.cwd()
        commit = git(["rev-parse", "HEAD"], cwd) or ""
        status = git(["status", "--porcelain", "--untracked-files=no"], cwd)
        return Provenance(commit, bool(status))


def git(args: list[str], cwd: Path) -> Optional[str]:
    """git's stripped output, or None outside a work tree or without git."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
