"""The Turing (sm_75) shared-memory clamp for vLLM's Triton unified-attention kernel.

rule.py is the pure tile rule; plugin.py applies it at vLLM start-up; filepatch.py edits an
installed file; status.py says which delivery is active; smem.py asks the real compiler;
requests.py holds the request of each action. Importing this package needs neither torch, triton
nor vLLM, and imports nothing else until a name below is used: vLLM loads the plugin through it in
every process, so it must stay as small as the plugin itself.

The actions, for the Python API (each takes its request and returns a typed result)::

    check_status(TuringStatusRequest()) -> TuringStatus
    apply_clamp(ApplyRequest(dry_run=True)) -> PatchResult
    verify_clamp(VerifyRequest()) -> VerifyResult
    revert_clamp(RevertRequest()) -> PatchResult
    compile_smem(SmemRequest(vllm_file=...)) -> SmemReport | LaunchSearch
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gemmaserve.turing.filepatch import PatchResult, VerifyResult, apply_clamp, revert_clamp, verify_clamp
    from gemmaserve.turing.requests import (
        ApplyRequest,
        RevertRequest,
        SmemRequest,
        TuringStatusRequest,
        VerifyRequest,
    )
    from gemmaserve.turing.smem import LaunchSearch, SmemReport, compile_smem
    from gemmaserve.turing.status import TuringStatus, check_status

_EXPORTS = {
    "check_status": "status",
    "TuringStatus": "status",
    "apply_clamp": "filepatch",
    "verify_clamp": "filepatch",
    "revert_clamp": "filepatch",
    "PatchResult": "filepatch",
    "VerifyResult": "filepatch",
    "compile_smem": "smem",
    "SmemReport": "smem",
    "LaunchSearch": "smem",
    "TuringStatusRequest": "requests",
    "ApplyRequest": "requests",
    "VerifyRequest": "requests",
    "RevertRequest": "requests",
    "SmemRequest": "requests",
}

__all__ = [
    "ApplyRequest",
    "LaunchSearch",
    "PatchResult",
    "RevertRequest",
    "SmemReport",
    "SmemRequest",
    "TuringStatus",
    "TuringStatusRequest",
    "VerifyRequest",
    "VerifyResult",
    "apply_clamp",
    "check_status",
    "compile_smem",
    "revert_clamp",
    "verify_clamp",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
