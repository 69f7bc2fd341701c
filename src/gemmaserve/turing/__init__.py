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

from typing import TYPE_CHECKING

from gemmaserve.exports import lazy_exports

if TYPE_CHECKING:
    from gemmaserve.turing.filepatch import PatchResult as PatchResult
    from gemmaserve.turing.filepatch import VerifyResult as VerifyResult
    from gemmaserve.turing.filepatch import apply_clamp as apply_clamp
    from gemmaserve.turing.filepatch import revert_clamp as revert_clamp
    from gemmaserve.turing.filepatch import verify_clamp as verify_clamp
    from gemmaserve.turing.requests import ApplyRequest as ApplyRequest
    from gemmaserve.turing.requests import RevertRequest as RevertRequest
    from gemmaserve.turing.requests import SmemRequest as SmemRequest
    from gemmaserve.turing.requests import TuringStatusRequest as TuringStatusRequest
    from gemmaserve.turing.requests import VerifyRequest as VerifyRequest
    from gemmaserve.turing.smem import LaunchSearch as LaunchSearch
    from gemmaserve.turing.smem import SmemReport as SmemReport
    from gemmaserve.turing.smem import compile_smem as compile_smem
    from gemmaserve.turing.status import TuringStatus as TuringStatus
    from gemmaserve.turing.status import check_status as check_status

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".status": ("check_status", "TuringStatus"),
        ".filepatch": ("apply_clamp", "verify_clamp", "revert_clamp", "PatchResult", "VerifyResult"),
        ".smem": ("compile_smem", "SmemReport", "LaunchSearch"),
        ".requests": ("TuringStatusRequest", "ApplyRequest", "VerifyRequest", "RevertRequest", "SmemRequest"),
    },
)
