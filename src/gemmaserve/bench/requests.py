"""What ``bench measure`` takes per target and what it returns: the run's summary (pydantic).

Kept apart from :mod:`.measure` so front ends (CLI, MCP) can import the shapes
without the engine. Pure data, plus the catalog look-up of hardware and price.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from gemmaserve.bench.schema import HardwareInfo


class RunStatus(StrEnum):
    SUCCESS = "success"  # every planned phase finished and every request succeeded
    PARTIAL = "partial"  # some requests failed or some phases are missing, but results exist
    FAILED = "failed"  # no measured request succeeded
    INTERRUPTED = "interrupted"


EXIT_CODES = {RunStatus.SUCCESS: 0, RunStatus.PARTIAL: 1, RunStatus.FAILED: 1, RunStatus.INTERRUPTED: 130}


class TargetOptions(BaseModel):
    """Per-target extras: a label for tables and file names, a vLLM log, hardware and price."""

    label: str | None = None
    log_path: str | None = None
    hardware: HardwareInfo = Field(default_factory=HardwareInfo)


class TargetSummary(BaseModel):
    url: str
    label: str
    path: str
    status: RunStatus
    requests: int
    failed: int
    short_replies: int
    failures_by_reason: dict[str, int]
    finished: list[str]
    missing: list[str]
    decode_tokens_per_s: float | None
    intercept_s: float | None
    intercept_flag: str | None = None  # "negative": the intercept is not a fixed cost
    decode_warnings: list[str] = []
    load_output_tokens_per_s: dict[str, float | None]
    quality_correct: int | None
    quality_total: int | None
    client_warning: str | None
    note: str | None = None


class MeasureReport(BaseModel):
    run_id: str
    out_dir: str
    status: RunStatus
    exit_code: int
    transport: str
    targets: list[TargetSummary]
    message: str


def hardware_info(
    *, instance: str | None = None, gpu: str | None = None, price_usd_per_hour: float | None = None
) -> HardwareInfo:
    """Hardware and list price from the catalog; an explicit price overrides the catalog's.

    Raises:
        UnknownName: an instance or GPU the catalog does not know (exit 2).
    """
    from gemmaserve.catalog import resolve_gpu, resolve_instance

    values: dict[str, Any] = {}
    if instance:
        entry = resolve_instance(instance)
        values.update(instance=entry.key, gpu=entry.gpu, gpu_count=entry.gpu_count)
        if entry.price is not None:
            values.update(
                price_usd_per_hour=entry.price.usd_per_hour,
                price_region=entry.price.region,
                price_date=entry.price.date,
                price_source=entry.price.source,
            )
    if gpu:
        values["gpu"] = resolve_gpu(gpu).key
    if price_usd_per_hour is not None:
        values.update(price_usd_per_hour=price_usd_per_hour, price_source="user", price_date=None, price_region=None)
    return HardwareInfo(**values)
