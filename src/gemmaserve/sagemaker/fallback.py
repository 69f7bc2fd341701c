"""Capacity fallback across regions: try each region in order, skipping those without quota.

Within a region InstancePools is the fallback; across regions we move on when a
deploy is refused for quota (immediate ``ResourceLimitExceeded``) or fails for
capacity (``InsufficientInstanceCapacity``, after ~30 min). Each failed region's
resources are torn down before the next is tried.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel

from gemmaserve.cost import PriceLookup, catalog_price
from gemmaserve.errors import CapacityUnavailable, QuotaExceeded
from gemmaserve.progress import CancelToken, ProgressCallback, ProgressEvent, check, report
from gemmaserve.sagemaker.aws import ClientFactory
from gemmaserve.sagemaker.endpoint import (
    DeployPlan,
    DeployResult,
    DeploySpec,
    execute_deploy,
    plan_deploy,
)
from gemmaserve.sagemaker.quota import QuotaCheck
from gemmaserve.sagemaker.status import EndpointState

QuotaChecker = Callable[[str], list[QuotaCheck]]
Waiter = Callable[[str], EndpointState]  # region -> state, raises on failure


class RegionAttempt(BaseModel):
    region: str
    outcome: str  # "deployed", "skipped-quota", "quota-exceeded", "capacity"
    detail: str


class FallbackResult(BaseModel):
    result: DeployResult
    attempts: list[RegionAttempt]


def deploy_across_regions(
    factory: ClientFactory,
    spec: DeploySpec,
    regions: list[str],
    *,
    now: Callable[[], datetime],
    wait: Waiter | None,
    quota_checker: QuotaChecker | None = None,
    keep: bool = False,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    price_lookup: PriceLookup = catalog_price,
    execute: Callable[..., DeployResult] = execute_deploy,
    sleep: Callable[[float], None] | None = None,
) -> FallbackResult:
    """Deploy in the first region that has quota and capacity (``cancel`` is checked before each region)."""
    attempts: list[RegionAttempt] = []
    for region in regions:
        check(cancel)
        if quota_checker is not None:
            short = [check for check in quota_checker(region) if check.ok is False]
            if short:
                detail = "; ".join(f"{c.quota_name}: {c.used}/{c.limit} held" for c in short)
                attempts.append(RegionAttempt(region=region, outcome="skipped-quota", detail=detail))
                report(progress, ProgressEvent("fallback", f"Skipping {region}: not enough quota ({detail})"))
                continue
        plan: DeployPlan = plan_deploy(spec, region=region, now=now(), price_lookup=price_lookup)
        waiter: Callable[[], EndpointState] | None = (lambda r=region: wait(r)) if wait is not None else None
        try:
            result = execute(
                factory("sagemaker", region),
                plan,
                now=now,
                keep=keep,
                wait=waiter,
                progress=progress,
                cancel=cancel,
                sleep=sleep,
            )
        except QuotaExceeded as error:
            attempts.append(RegionAttempt(region=region, outcome="quota-exceeded", detail=error.message))
            report(progress, ProgressEvent("fallback", f"{region}: quota exceeded; trying the next region"))
            continue
        except CapacityUnavailable as error:
            attempts.append(RegionAttempt(region=region, outcome="capacity", detail=error.message))
            report(progress, ProgressEvent("fallback", f"{region}: no capacity; trying the next region"))
            continue
        attempts.append(RegionAttempt(region=region, outcome="deployed", detail=plan.endpoint_name))
        return FallbackResult(result=result, attempts=attempts)
    raise CapacityUnavailable(
        f"No region of {regions} could take endpoint {spec.endpoint_name!r}: "
        + "; ".join(f"{a.region}: {a.outcome}" for a in attempts),
        hint="Add regions (--regions), same-GPU instance types to the pool, or request quota.",
        attempts=[a.model_dump() for a in attempts],
    )


def quota_checker_for(factory: ClientFactory, spec: DeploySpec) -> QuotaChecker:
    from gemmaserve.sagemaker.quota import check_quotas

    def checker(region: str) -> list[QuotaCheck]:
        return check_quotas(
            factory("service-quotas", region),
            factory("sagemaker", region),
            spec.instance_types,
            spec.instance_count,
            region=region,
        )

    return checker
