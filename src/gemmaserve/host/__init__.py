"""Probes of this host and of a target Python interpreter, and doctor's verdicts on them.

Probes (memory, disk, gpu, interpreter) do the I/O through injectable sources
and never raise for a failed step: each records the exception text instead.
``host_checks`` and ``python_checks`` turn probe results into findings (``gemmaserve.findings``);
``doctor`` wires both.

The action: ``doctor(DoctorRequest(...)) -> DoctorReport``. Imported on first use, so that
``import gemmaserve.host`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DoctorRequest": "gemmaserve.host.doctor",
    "DoctorSources": "gemmaserve.host.doctor",
    "doctor": "gemmaserve.host.doctor",
    "DoctorReport": "gemmaserve.host.verdicts",
    "Finding": "gemmaserve.findings",
    "Status": "gemmaserve.findings",
}

__all__ = ["DoctorReport", "DoctorRequest", "DoctorSources", "Finding", "Status", "doctor"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gemmaserve.host' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
