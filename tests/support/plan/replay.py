"""One recorded H200 start replayed through the plan, for the tests that hold the plan to real engine runs."""

from __future__ import annotations

from typing import Any

from gemmaserve.catalog import resolve_encoding, resolve_gpu, resolve_model
from gemmaserve.plan import PlanRow, PlanTarget, plan_for
from gemmaserve.request_model import ServingSettings


def replay_h200_start(
    settings: dict[str, Any], total_gib: float, language_model_only: bool, vllm: str, first_start: bool = True
) -> PlanRow:
    """The plan of a recorded bf16 start on an H200 whose device reported ``total_gib``, at the run's settings."""
    gpu = resolve_gpu("h200").model_copy(update={"visible_memory_gib": total_gib})
    model = resolve_model(settings["model"])
    serving = ServingSettings(
        max_model_len=settings["max_model_len"],
        gpu_memory_utilization=settings["gpu_memory_utilization"],
        max_num_seqs=settings["max_num_seqs"],
        max_num_batched_tokens=settings["max_num_batched_tokens"],
        language_model_only=language_model_only,
        vllm=vllm,
    )
    return plan_for(PlanTarget(model, resolve_encoding(model, "bf16"), gpu), serving, first_start)
