"""GPU architectures as gemmaserve spells them (``7.5``, ``sm_75``) and their shared-memory limits (pure).

Below both the requests, whose validators check an architecture or a capability, and the actions
(``smem.py``, ``status.py``) that use the same spellings and limits.
"""

from __future__ import annotations

import re

from gemmaserve.errors import UsageError

#: Opt-in shared memory per block by architecture (CUDA programming guide, compute capabilities table).
SMEM_OPTIN_BYTES = {75: 65_536, 80: 166_912, 86: 101_376, 89: 101_376, 90: 232_448}


def arch_number(arch: str) -> int | None:
    """``"sm_75"`` (or ``"sm75"``) → ``75``; None for anything else."""
    match = re.fullmatch(r"sm_?(\d{2,3})", arch.strip())
    return None if match is None else int(match[1])


def parse_capability(text: str) -> str:
    """``"7.5"``, ``"sm_75"`` or ``"75"`` → ``"7.5"``; UsageError otherwise."""
    match = re.fullmatch(r"(?:sm_?)?(\d+)\.?(\d)", text.strip())
    if match is None:
        raise UsageError(f"{text!r} is not a compute capability.", hint="Use the form 7.5 or sm_75.")
    return f"{int(match[1])}.{match[2]}"
