"""Run one external command with an argv list and a timeout; the seam every probe uses.

Never ``shell=True``. A missing binary, a timeout or a non-zero exit is data
(``CommandResult``) or a plain exception the caller records; tests pass their
own runner or put a real fake binary on PATH.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict


class CommandResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


CommandRunner = Callable[[list[str], float], CommandResult]


def run_command(argv: list[str], timeout_s: float, env: Mapping[str, str] | None = None) -> CommandResult:
    """Run ``argv``; raises FileNotFoundError (no binary) or subprocess.TimeoutExpired."""
    completed = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout_s,
        check=False,
        stdin=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
    )
    return CommandResult(
        argv=argv,
        returncode=completed.returncode,
        stdout=completed.stdout,
        stderr=completed.stderr,
    )
