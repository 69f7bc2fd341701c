"""Typed verdicts: one :class:`~gemmaserve.findings.Finding` per question doctor asks, and the report they make.

Pure data. ``unknown`` is never ok: a required check that is unknown makes the
report not ok, exactly like a failure. ``not-applicable`` passes, and says why (a GPU
check when vLLM runs on the CPU platform).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from gemmaserve.findings import Finding
from gemmaserve.plan import PlanRow
from gemmaserve.result_model import ActionResult


class HostNeeds(BaseModel):
    """What the planned deployment asks of this host, from ``gemmaserve.plan``."""

    model_config = ConfigDict(frozen=True)

    model: str
    encoding: str
    gpu: str | None = None  # catalog key of the GPU the plan was made for
    host_ram_needed_gib: float
    checkpoint_gib: float
    repo_id: str | None = None
    checkpoint_cached: bool = False  # its safetensors already sit in the HF cache: no download
    install_disk_gib: float
    temp_disk_gib: float
    fits: bool | None = None  # None when this host's GPU is not in the catalog
    verdict: str | None = None
    binding_term: str | None = None
    dtype: str | None = None
    needs_turing_clamp: bool | None = None
    vllm_rules: str | None = None  # which vLLM release's memory rules the plan followed, and why


class HostPlan(BaseModel):
    """The one plan row doctor judges and serve start launches with: planned once, then handed down.

    ``row`` is planned for the host's catalog GPU (``gpu_known``); when the GPU is not in the catalog it is
    planned for a stand-in GPU, and only its host-side terms (RAM, disk, the ``vllm serve`` flags) count.
    """

    model_config = ConfigDict(frozen=True)

    row: PlanRow | None = None
    error: str | None = None  # why no row could be made (the plan's checks are then unknown)
    gpu_known: bool = False
    vllm_version: str
    vllm_from: str = Field(description="Why this release: --vllm, the target interpreter's vLLM, or the newest.")


class DoctorReport(ActionResult):
    """``ok`` (computed): at least one check ran and no required check failed or is unknown."""

    model_config = ConfigDict(frozen=True)

    python: str
    model: str
    encoding: str
    gpu: str | None
    checks: list[Finding]
    # What the target interpreter's vLLM says of itself (None: it did not import).
    vllm_version: str | None = None
    vllm_distribution: str | None = None
    engine_platform: str | None = Field(default=None, description="vLLM's current_platform: cuda, cpu, …")
    plan: HostPlan | None = Field(default=None, description="The plan row the checks judged (and serve start runs).")

    @property
    def cpu_engine(self) -> bool:
        """vLLM runs on the CPU platform: no GPU, no Turing clamp."""
        return self.engine_platform == "cpu"

    @property
    def blocking(self) -> list[Finding]:
        return [check for check in self.checks if check.blocks]

    def succeeded(self) -> bool:
        return bool(self.checks) and not self.blocking
