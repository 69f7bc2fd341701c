"""Every endpoint gemmaserve created, across regions, with age, status and hourly cost; and cleanup of the expired.

Ours = tagged ``gemmaserve:tool=gemmaserve``. A region that fails to answer is
reported, not hidden: a list that silently skips a region would hide a leak.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from gemmaserve.errors import AwsError
from gemmaserve.sagemaker.aws import call, paginate
from gemmaserve.sagemaker.clients import ClientFactory
from gemmaserve.sagemaker.cost import PriceLookup, catalog_price, cost_so_far_usd
from gemmaserve.sagemaker.delete import DeleteReport, delete_deployment
from gemmaserve.sagemaker.status import EndpointStatus, describe_endpoint_state
from gemmaserve.sagemaker.tags import is_expired, parse_tags, tags_to_dict

# Regions with SageMaker GPU hosting that `--all-regions` sweeps.
SWEEP_REGIONS = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "eu-north-1",
                 "ap-northeast-1", "ap-southeast-1", "ap-southeast-2", "ap-south-1", "ca-central-1", "sa-east-1"]


class DeploymentSummary(BaseModel):
    endpoint_name: str
    region: str
    status: EndpointStatus
    instance_type: str | None
    instance_count: int | None
    created_at: datetime | None
    age_s: float | None
    owner: str | None
    model: str | None
    expires_at: datetime | None
    keep: bool
    expired: bool
    usd_per_hour: float | None
    price_source: str | None
    cost_so_far_usd: float | None


class RegionError(BaseModel):
    region: str
    error: str
    message: str


class Inventory(BaseModel):
    regions: list[str]
    endpoints: list[DeploymentSummary]
    errors: list[RegionError]
    total_usd_per_hour: float


class CleanupReport(BaseModel):
    dry_run: bool
    expired: list[DeploymentSummary]
    deleted: list[DeleteReport]
    errors: list[RegionError]


def list_deployments(
    factory: ClientFactory, regions: list[str], *, now: datetime, price_lookup: PriceLookup = catalog_price
) -> Inventory:
    endpoints: list[DeploymentSummary] = []
    errors: list[RegionError] = []
    for region in regions:
        try:
            endpoints.extend(_region_deployments(factory("sagemaker", region), region, now, price_lookup))
        except AwsError as error:
            errors.append(RegionError(region=region, error=type(error).__name__, message=error.message))
    total = sum(item.usd_per_hour or 0.0 for item in endpoints if item.status.billing)
    return Inventory(regions=regions, endpoints=endpoints, errors=errors, total_usd_per_hour=round(total, 4))


def _region_deployments(sm: Any, region: str, now: datetime, price_lookup: PriceLookup) -> list[DeploymentSummary]:
    found = []
    for page in paginate(region, sm, "list_endpoints"):
        for summary in page.get("Endpoints", []):
            tags = tags_to_dict(call(region, sm.list_tags, ResourceArn=summary["EndpointArn"]).get("Tags", []))
            ours = parse_tags(tags)
            if ours is None:
                continue
            state = describe_endpoint_state(sm, summary["EndpointName"], region=region, now=now)
            if state.status is EndpointStatus.NOT_FOUND:
                continue
            price = price_lookup(state.instance_type, region) if state.instance_type else None
            count = state.instance_count or 1
            usd_per_hour = price.usd_per_hour * count if price else None
            age_s = state.elapsed_s
            found.append(DeploymentSummary(
                endpoint_name=state.endpoint_name, region=region, status=state.status,
                instance_type=state.instance_type, instance_count=state.instance_count,
                created_at=state.created_at, age_s=age_s, owner=ours.owner, model=ours.model,
                expires_at=ours.expires_at, keep=ours.keep, expired=is_expired(ours, now),
                usd_per_hour=usd_per_hour,
                price_source=f"{price.source} ({price.date}{', estimated' if price.estimated else ''})" if price else None,
                cost_so_far_usd=cost_so_far_usd(usd_per_hour, age_s or 0.0) if state.status.billing else None,
            ))
    return found


def cleanup_expired(
    factory: ClientFactory,
    regions: list[str],
    *,
    now: datetime,
    dry_run: bool,
    delete: Callable[[Any, str, str], DeleteReport] | None = None,
    price_lookup: PriceLookup = catalog_price,
) -> CleanupReport:
    """Delete every endpoint of ours past its TTL (``dry_run``: only say which)."""
    inventory = list_deployments(factory, regions, now=now, price_lookup=price_lookup)
    expired = [item for item in inventory.endpoints if item.expired]
    report = CleanupReport(dry_run=dry_run, expired=expired, deleted=[], errors=list(inventory.errors))
    if dry_run:
        return report
    remove = delete or (lambda sm, name, region: delete_deployment(sm, name, region=region))
    for item in expired:
        try:
            report.deleted.append(remove(factory("sagemaker", item.region), item.endpoint_name, item.region))
        except AwsError as error:
            report.errors.append(RegionError(region=item.region, error=type(error).__name__, message=error.message))
    return report
